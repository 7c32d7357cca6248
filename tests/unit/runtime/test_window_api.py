"""WindowedStream's API: which operator runs, and the errors a pipeline gets before the job starts."""

from __future__ import annotations

from typing import Any

import pytest

import sluice
from sluice.connectors import GeneratorSource
from sluice.engine.operators.keyed_window import KeyedWindowOperator
from sluice.engine.operators.window import WindowOperator
from sluice.graph.transformations import Transformation
from sluice.windows import EventTimeSessionWindows, TimeWindow, TumblingEventTimeWindows

LATE = sluice.OutputTag("late")


def keyed() -> sluice.KeyedStream:
    env = sluice.StreamEnvironment()
    return env.from_source(GeneratorSource(lambda i: (i, i), count=1), uid="gen").key_by(lambda r: r[0])


def add(a: Any, b: Any) -> Any:
    return (a[0], a[1] + b[1])


class NoMerge(sluice.AggregateFunction):
    def create_accumulator(self) -> int:
        return 0

    def add(self, value: Any, accumulator: int) -> int:
        return accumulator + 1

    def get_result(self, accumulator: int) -> int:
        return accumulator


class Describe(sluice.ProcessWindowFunction):
    def process(self, key: Any, window: TimeWindow, elements: list[Any]) -> list[Any]:
        return [(key, window.start, window.end, len(elements))]


def operator_of(stream: sluice.DataStream) -> object:
    return stream._node.factory("uid")


def test_session_gap_must_be_positive() -> None:
    for bad in (0, -5):
        with pytest.raises(ValueError, match="a session window needs a positive gap"):
            EventTimeSessionWindows.with_gap_millis(bad)
    with pytest.raises(ValueError, match="a session window needs a positive gap"):
        EventTimeSessionWindows.with_gap_seconds(0)
    assert EventTimeSessionWindows.with_gap_seconds(1.5).gap_ms == 1500


def test_allowed_lateness_must_be_positive() -> None:
    windowed = keyed().window(TumblingEventTimeWindows.of_millis(1000))
    for bad in (0, -1):
        with pytest.raises(ValueError, match="allowed_lateness_millis needs a positive"):
            windowed.allowed_lateness_millis(bad)


def test_side_output_late_data_needs_a_tag() -> None:
    windowed = keyed().window(TumblingEventTimeWindows.of_millis(1000))
    with pytest.raises(TypeError, match=r"side_output_late_data needs a sluice\.OutputTag"):
        windowed.side_output_late_data("late")  # type: ignore[arg-type]


def test_session_aggregate_needs_merge() -> None:
    windowed = keyed().window(EventTimeSessionWindows.with_gap_millis(100))
    with pytest.raises(TypeError, match=r"NoMerge must implement merge\(first, second\)"):
        windowed.aggregate(NoMerge(), uid="agg")
    # Tumbling windows never merge: no merge needed.
    keyed().window(TumblingEventTimeWindows.of_millis(100)).aggregate(NoMerge(), uid="agg")


def test_window_process_needs_a_process_window_function() -> None:
    windowed = keyed().window(TumblingEventTimeWindows.of_millis(1000))
    with pytest.raises(TypeError, match=r"needs a sluice\.ProcessWindowFunction"):
        windowed.process(lambda *a: a, uid="p")  # type: ignore[arg-type]


def test_late_data_side_output_is_declared_only_when_asked_for() -> None:
    plain = keyed().window(TumblingEventTimeWindows.of_millis(1000)).reduce(add, uid="w")
    with pytest.raises(ValueError, match="has no side output 'late'"):
        plain.get_side_output(LATE)
    declared = (
        keyed()
        .window(TumblingEventTimeWindows.of_millis(1000))
        .side_output_late_data(LATE)
        .reduce(add, uid="w")
    )
    assert declared.get_side_output(LATE)._node.kind == "side_output"


def test_one_tag_name_cannot_mean_two_things_on_one_operator() -> None:
    node = Transformation(id=0, kind="window", name="w", uid="w", factory=lambda u: None)
    node.declare_side_output("x", "late data")
    node.declare_side_output("x", "late data")  # the same meaning again is fine
    with pytest.raises(ValueError, match="side output 'x' would carry both late data and dead letters"):
        node.declare_side_output("x", "dead letters")


def test_windows_that_fire_once_keep_the_fast_operator() -> None:
    tumbling = keyed().window(TumblingEventTimeWindows.of_millis(1000))
    assert type(operator_of(tumbling.reduce(add, uid="a"))) is WindowOperator
    assert type(operator_of(tumbling.allowed_lateness_millis(5).reduce(add, uid="b"))) is KeyedWindowOperator
    assert type(operator_of(tumbling.side_output_late_data(LATE).reduce(add, uid="c"))) is KeyedWindowOperator
    assert type(operator_of(tumbling.process(Describe(), uid="d"))) is KeyedWindowOperator
    sessions = keyed().window(EventTimeSessionWindows.with_gap_millis(5))
    assert type(operator_of(sessions.reduce(add, uid="e"))) is KeyedWindowOperator
