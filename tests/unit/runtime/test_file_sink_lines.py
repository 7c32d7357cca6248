"""FileSink's lines: the bytes and errors of `json.dumps` for each value, with or without the C encoder."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.connectors import files
from sluice.connectors.files import json_lines

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()  # any code point, surrogates and controls included
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=5) | st.integers() | st.booleans() | st.none(), inner, max_size=4)
    ),
    max_leaves=12,
)


def dumps_lines(batch: list[Any]) -> bytes:
    return ("\n".join(json.dumps(v) for v in batch) + "\n").encode("utf-8")


@pytest.fixture(params=["c encoder", "json.dumps"])
def encoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "json.dumps":
        monkeypatch.setattr(files, "_MAKE_ENCODER", None)
    name: str = request.param
    return name


@settings(max_examples=400, deadline=None)
@given(batch=st.lists(values, min_size=1, max_size=6))
def test_each_line_is_what_json_dumps_gives(batch: list[Any]) -> None:
    assert json_lines(batch) == dumps_lines(batch)


def test_the_fallback_without_the_c_encoder_gives_the_same_bytes(encoder: str) -> None:
    batch: list[Any] = [(1, 2), {"é": [1.5, math.inf, None, True]}, 'quote " and \n', 3.0, [[]], {}, -0.0]
    assert json_lines(batch) == dumps_lines(batch)


def test_a_value_json_cannot_encode_raises_as_json_dumps_does(encoder: str) -> None:
    with pytest.raises(TypeError, match="Object of type object is not JSON serializable"):
        json_lines([1, object()])
    with pytest.raises(TypeError, match="keys must be str, int, float, bool or None"):
        json_lines([{(1, 2): 3}])


def test_a_circular_value_raises_as_json_dumps_does_and_the_next_batch_is_unaffected(encoder: str) -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference detected"):
        json_lines([loop])
    shared = [1, 2]
    # The same list twice in one batch, and again in the next: shared, not circular.
    assert json_lines([shared, {"a": shared}, shared]) == dumps_lines([shared, {"a": shared}, shared])
    assert json_lines([shared]) == b"[1, 2]\n"
