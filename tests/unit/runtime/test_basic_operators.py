"""Record-at-a-time operators: timestamps stay with their records; functions get their hooks and state."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from sluice.checkpoint.snapshot import RestoredState
from sluice.engine.operators.basic import FilterOperator, FlatMapOperator, MapOperator, ProcessOperator
from sluice.functions import FlatMapFunction, MapFunction, ProcessFunction, RuntimeContext

from ._support import start


def test_map_keeps_timestamps() -> None:
    op = MapOperator("m", lambda v: v * 10)
    out, _ = start(op)
    op.process_batch([1, 2], [100, 200])
    op.process_batch([3], None)
    assert out.events == [("records", [10, 20], [100, 200]), ("records", [30], None)]


def test_filter_keeps_the_timestamps_of_kept_records_and_emits_no_empty_batch() -> None:
    op = FilterOperator("f", lambda v: v % 2 == 0)
    out, _ = start(op)
    op.process_batch([1, 2, 3, 4], [10, 20, 30, 40])
    op.process_batch([5, 7], [50, 70])
    assert out.events == [("records", [2, 4], [20, 40])]


def test_flat_map_repeats_the_timestamp_for_every_output_of_a_record() -> None:
    op = FlatMapOperator("fm", lambda v: [v] * v)
    out, _ = start(op)
    op.process_batch([0, 2, 3], [5, 6, 7])
    assert out.events == [("records", [2, 2, 3, 3, 3], [6, 6, 7, 7, 7])]


class Buffering(FlatMapFunction):
    """Holds records back in operator list state and flushes them at finish."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def open(self, ctx: RuntimeContext) -> None:
        self.calls.append(f"open {ctx.subtask_index}/{ctx.parallelism}")
        self.buffer = ctx.get_operator_list_state("buffer")

    def flat_map(self, value: Any) -> Iterable[Any]:
        self.buffer.append(value)
        return []

    def finish(self) -> Iterable[Any]:
        self.calls.append("finish")
        flushed, self.buffer[:] = list(self.buffer), []
        return flushed

    def close(self) -> None:
        self.calls.append("close")


def test_function_hooks_and_operator_list_state_through_a_restore() -> None:
    fn = Buffering()
    op = FlatMapOperator("buf", fn)
    out, _ = start(op, subtask=1, parallelism=2)
    op.process_batch(["a", "b"], None)
    snapshot = op.snapshot_state(1)
    assert snapshot is not None and snapshot.lists == {"buffer": ["a", "b"]}
    assert out.records == []

    again_fn = Buffering()
    again = FlatMapOperator("buf", again_fn)
    again_out, _ = start(again, restored=RestoredState(lists=dict(snapshot.lists)))
    again.process_batch(["c"], None)
    again.finish()
    again.close()
    assert again_out.records == ["a", "b", "c"]
    assert fn.calls == ["open 1/2"]
    assert again_fn.calls == ["open 0/1", "finish", "close"]


def test_map_function_class_is_called_through_its_map_method() -> None:
    class Double(MapFunction):
        def map(self, value: Any) -> Any:
            return value * 2

    op = MapOperator("m", Double())
    out, _ = start(op)
    op.process_batch([4], None)
    assert out.records == [8]


def test_process_function_outputs_keep_the_record_timestamp() -> None:
    class Split(ProcessFunction):
        def process_element(self, value: Any, timestamp: int | None) -> Iterable[Any] | None:
            return None if value == "" else value.split()

    op = ProcessOperator("p", Split())
    out, _ = start(op)
    op.process_batch(["a b", "", "c"], [1, 2, 3])
    assert out.events == [("records", ["a", "b", "c"], [1, 1, 3])]


def test_process_needs_a_process_function() -> None:
    op = ProcessOperator("p", lambda v: [v])
    with pytest.raises(TypeError, match=r"'p': process\(\) needs a sluice\.ProcessFunction"):
        start(op)
