"""Each step of the pipeline API tells mypy the class it returns, so that a user's typed pipeline is
checked step by step: `key_by` says KeyedStream, `window` WindowedStream, and every last step
DataStream. The stream classes share one module so that these names stay exact with no import cycle
(`sluice.api`); this pins them, for every public method, so that a later split cannot loosen them.
"""

from __future__ import annotations

import inspect
from typing import get_type_hints

import pytest

import sluice
from sluice.api.datastream import (
    ConnectedStreams,
    DataStream,
    IntervalJoinBuilder,
    IntervalJoined,
    JoinedKeys,
    JoinedStreams,
    KeyedStream,
    WindowedStream,
    WindowJoin,
)
from sluice.api.environment import StreamEnvironment

RETURNS: dict[type, dict[str, type]] = {
    StreamEnvironment: {"set_parallelism": StreamEnvironment, "from_source": DataStream},
    DataStream: {
        "set_parallelism": DataStream,
        "rebalance": DataStream,
        "broadcast": DataStream,
        "forward": DataStream,
        "key_by": KeyedStream,
        "union": DataStream,
        "connect": ConnectedStreams,
        "join": JoinedStreams,
        "get_side_output": DataStream,
        "map": DataStream,
        "filter": DataStream,
        "flat_map": DataStream,
        "process": DataStream,
        "assign_timestamps": DataStream,
        "sink_to": DataStream,
    },
    KeyedStream: {
        "reduce": DataStream,
        "process": DataStream,
        "interval_join": IntervalJoinBuilder,
        "window": WindowedStream,
    },
    WindowedStream: {
        "allowed_lateness_millis": WindowedStream,
        "side_output_late_data": WindowedStream,
        "reduce": DataStream,
        "aggregate": DataStream,
        "process": DataStream,
    },
    ConnectedStreams: {"key_by": ConnectedStreams, "process": DataStream},
    JoinedStreams: {"where": JoinedStreams, "equal_to": JoinedKeys},
    JoinedKeys: {"window": WindowJoin},
    WindowJoin: {"apply": DataStream},
    IntervalJoinBuilder: {"between": IntervalJoined},
    IntervalJoined: {"process": DataStream},
}


def _public_methods(cls: type) -> set[str]:
    """The public methods `cls` defines itself (a subclass's inherited ones are its base's)."""
    return {
        name for name, value in vars(cls).items() if inspect.isfunction(value) and not name.startswith("_")
    }


@pytest.mark.parametrize(
    ("cls", "method", "returns"),
    [(cls, method, returns) for cls, methods in RETURNS.items() for method, returns in methods.items()],
    ids=lambda v: v if isinstance(v, str) else getattr(v, "__name__", repr(v)),
)
def test_each_step_names_the_class_it_returns(cls: type, method: str, returns: type) -> None:
    assert get_type_hints(getattr(cls, method))["return"] is returns


@pytest.mark.parametrize("cls", list(RETURNS), ids=lambda cls: cls.__name__)
def test_every_public_method_is_pinned(cls: type) -> None:
    assert _public_methods(cls) == set(RETURNS[cls])


def test_the_sluice_package_exports_the_same_classes() -> None:
    exported = (sluice.StreamEnvironment, sluice.DataStream, sluice.KeyedStream, sluice.WindowedStream)
    assert exported == (StreamEnvironment, DataStream, KeyedStream, WindowedStream)
    assert sluice.ConnectedStreams is ConnectedStreams
