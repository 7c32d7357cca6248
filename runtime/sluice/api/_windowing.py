"""What `KeyedStream.window(...)` adds: the window operator for an assigner, with its allowed lateness
and the side output for late data, and the checks on each."""

from __future__ import annotations

import dataclasses
from typing import Any

from sluice.api._graph import Inputs, KeySelector, PipelineGraph
from sluice.engine.operators.keyed_window import KeyedWindowOperator
from sluice.engine.operators.window import WindowOperator
from sluice.functions import AggregateFunction
from sluice.graph.transformations import OperatorFactory, Transformation
from sluice.side_outputs import OutputTag
from sluice.windows import EventTimeSessionWindows, WindowAssigner


@dataclasses.dataclass(frozen=True)
class Lateness:
    """How long a window is kept past its end, and where records too late for it go (None: dropped)."""

    allowed_ms: int = 0
    late_tag: OutputTag | None = None

    def allowing(self, ms: int) -> Lateness:
        if not isinstance(ms, int) or isinstance(ms, bool) or ms <= 0:
            raise ValueError(
                f"allowed_lateness_millis needs a positive whole number of milliseconds, got {ms!r} "
                "(leave it out for no lateness)"
            )
        return dataclasses.replace(self, allowed_ms=ms)

    def sending_late_data_to(self, tag: OutputTag) -> Lateness:
        if not isinstance(tag, OutputTag):
            raise TypeError(f"side_output_late_data needs a sluice.OutputTag, got {tag!r}")
        return dataclasses.replace(self, late_tag=tag)


NO_LATENESS = Lateness()


def check_aggregate(fn: object, assigner: WindowAssigner) -> None:
    if not isinstance(fn, AggregateFunction):
        raise TypeError("aggregate() needs a sluice.AggregateFunction")
    if isinstance(assigner, EventTimeSessionWindows) and type(fn).merge is AggregateFunction.merge:
        raise TypeError(
            f"aggregate() over session windows: {type(fn).__name__} must implement merge(first, second), "
            "because two sessions of a key merge into one when a record bridges them"
        )


def add_window(
    graph: PipelineGraph,
    keyed: Inputs,
    key: KeySelector,
    assigner: WindowAssigner,
    lateness: Lateness,
    uid: str | None,
    name: str | None,
    function: dict[str, Any],
) -> Transformation:
    """The window operator over the keyed stream `keyed`, running `function` (one of `reduce=`,
    `aggregate=`, `process=`) on each window."""
    late_tag = lateness.late_tag.name if lateness.late_tag is not None else None
    factory: OperatorFactory
    if isinstance(assigner, EventTimeSessionWindows) or lateness != NO_LATENESS or "process" in function:
        factory = lambda u: KeyedWindowOperator(  # noqa: E731
            u, assigner, key, allowed_lateness_ms=lateness.allowed_ms, late_tag=late_tag, **function
        )
    else:
        # Windows that fire once and fold as they go: the operator tuned for that.
        factory = lambda u: WindowOperator(u, assigner, key, **function)  # noqa: E731
    node = graph.add("window", name or uid or "window", uid, factory, keyed, stateful=True)
    if late_tag is not None:
        node.declare_side_output(late_tag, "late data")
    return node
