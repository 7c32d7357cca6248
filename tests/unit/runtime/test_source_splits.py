"""A source subtask with several splits: side-by-side reading, a watermark per split, idleness, and
which positions a completed checkpoint reports to each split."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import pytest

from sluice import WatermarkStrategy
from sluice.checkpoint.snapshot import RestoredState
from sluice.connectors import GeneratorSource, SequenceSource, Source, SplitReader
from sluice.engine.operators.source import SourceOperator

from ._support import start


def pump(op: SourceOperator, rounds: int, batch: int = 4) -> None:
    for _ in range(rounds):
        if op.emit_next(batch) < 0:
            return


def test_a_subtask_reads_all_its_unbounded_splits_in_turn_and_restores_each_exactly() -> None:
    # Unbounded splits never end: read one after the other, every split after the first would starve.
    source = GeneratorSource(lambda i: i, splits=3)
    op = SourceOperator("src", source)
    out, _ = start(op)
    pump(op, 9)
    first = out.records
    assert sorted(i % 3 for i in first) == [0] * 12 + [1] * 12 + [2] * 12
    snapshot = op.snapshot_state(1)
    assert snapshot is not None and len(snapshot.lists["splits"]) == 3
    op.close()
    again = SourceOperator("src", source)
    out2, _ = start(again, restored=RestoredState(lists=dict(snapshot.lists)))
    pump(again, 9)
    assert sorted(first + out2.records) == list(range(72)), "each split continues where the snapshot left it"


def test_a_bounded_source_without_a_strategy_reads_its_splits_in_order() -> None:
    op = SourceOperator("src", SequenceSource(0, 40, splits=4))
    out, _ = start(op, subtask=0, parallelism=2)  # splits 0 and 2: [0, 10) and [20, 30)
    pump(op, 100)
    assert out.records == list(range(0, 10)) + list(range(20, 30))


@dataclass(frozen=True)
class Scripted:
    name: str
    read: int = 0


class ScriptedSource(Source[Scripted]):
    """Splits whose batches are given by the test: a list per split, [] meaning nothing for now."""

    bounded = False

    def __init__(self, batches: dict[str, list[list[int]]]) -> None:
        self.batches = batches

    def splits(self) -> list[Scripted]:
        return [Scripted(name) for name in self.batches]

    def open_split(self, split: Scripted) -> SplitReader[Scripted]:
        return ScriptedReader(self, split)


class ScriptedReader(SplitReader[Scripted]):
    def __init__(self, source: ScriptedSource, split: Scripted) -> None:
        self.source, self.split = source, split
        self.read_count = split.read
        self.notified: list[tuple[int, Scripted]] = []

    def read(self, max_records: int) -> list[Any] | None:
        batches = self.source.batches[self.split.name]
        if self.read_count >= len(batches):
            return []
        self.read_count += 1
        return batches[self.read_count - 1]

    def position(self) -> Scripted:
        return Scripted(self.split.name, self.read_count)

    def notify_checkpoint_complete(self, checkpoint_id: int, position: Scripted) -> None:
        self.notified.append((checkpoint_id, position))


def test_the_watermark_is_the_minimum_over_the_splits_so_a_split_behind_loses_nothing() -> None:
    # Split "a" runs far ahead of split "b". With one watermark for the subtask, b's records would be
    # late; with one per split the subtask's watermark waits for b.
    source = ScriptedSource({"a": [[1000, 1100], [5000, 5100]], "b": [[10, 20], [30]]})
    op = SourceOperator("src", source, WatermarkStrategy(lambda t: t, max_out_of_orderness_ms=0))
    out, _ = start(op)
    pump(op, 6)
    assert sorted(out.timestamped) == sorted((t, t) for t in (1000, 1100, 5000, 5100, 10, 20, 30))
    # The first watermark comes once both splits brought a record: b's 20 - 1. Then b's 30 - 1.
    assert out.watermarks == [19, 29]
    stamps_after = {
        w: [t for kind, v, ts in out.events[i:] if kind == "records" for t in ts or []]
        for i, (kind, w, _) in enumerate(out.events)
        if kind == "watermark"
    }
    assert all(t > w for w, ts in stamps_after.items() for t in ts if t in (10, 20, 30)), "no b record late"


def test_an_idle_split_stops_holding_event_time_back_and_its_record_makes_it_active_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1_000_000]
    monkeypatch.setattr("sluice.engine.operators.source.processing_time_ms", lambda: now[0])
    source = ScriptedSource({"busy": [[100], [200], [300]], "quiet": []})
    op = SourceOperator("src", source, WatermarkStrategy(lambda t: t, idleness_ms=50))
    out, _ = start(op)
    pump(op, 1)  # opens both splits (at 1_000_000) and reads the busy one's first record
    now[0] += 30
    pump(op, 3)
    assert out.watermarks == [], "the quiet split has brought nothing: it holds event time back"
    assert op.next_processing_timer() == 1_000_050, "the quiet split turns idle 50 ms after it opened"
    op.on_processing_time(1_000_049)
    assert out.watermarks == []
    op.on_processing_time(1_000_050)
    assert out.watermarks == [299], "once the quiet split is idle, the busy one alone sets the watermark"
    assert op.next_processing_timer() == 1_000_080
    op.on_processing_time(1_000_080)  # the busy split brought nothing for 50 ms either
    assert out.events[-1] == ("idle", True, None), "every split idle: the subtask is idle"
    source.batches["quiet"].append([400])
    pump(op, 2)
    at = out.events.index(("idle", True, None))
    assert out.events[at + 1] == ("idle", False, None), "active again before the record goes out"
    assert out.events[at + 2] == ("records", [400], [400])
    assert out.watermarks[-1] == 399


def test_an_ended_split_no_longer_holds_the_watermark() -> None:
    op = SourceOperator(
        "src", SequenceSource(0, 6, splits=2), WatermarkStrategy(lambda i: i * 100, max_out_of_orderness_ms=0)
    )
    out, _ = start(op)  # splits [0, 3) and [3, 6), read side by side
    pump(op, 10, batch=1)
    assert out.records == [0, 3, 1, 4, 2, 5]
    assert out.watermarks[-1] == 499, "once [0, 3) ended, [3, 6) alone sets the watermark"


def test_a_completed_checkpoint_reports_to_each_open_split_the_position_it_holds() -> None:
    source = ScriptedSource({"a": [[1], [2], [3]], "b": [[4], [5]]})
    op = SourceOperator("src", source)
    start(op)
    pump(op, 2)
    op.snapshot_state(1)
    pump(op, 2)
    op.snapshot_state(2)
    op.snapshot_state(3)
    op.notify_checkpoint_aborted(3)
    op.notify_checkpoint_complete(2)  # subsumes 1
    readers = sorted((cast(ScriptedReader, r) for r in op._readers.values()), key=lambda r: r.split.name)
    assert [r.notified for r in readers] == [[(2, Scripted("a", 2))], [(2, Scripted("b", 2))]]
    op.notify_checkpoint_complete(3)  # aborted: nothing to report
    assert [len(r.notified) for r in readers] == [1, 1]


@pytest.mark.parametrize("bad", [{"max_out_of_orderness_ms": -1}, {"idleness_ms": 0}])
def test_a_watermark_strategy_refuses_nonsense(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="WatermarkStrategy"):
        WatermarkStrategy(lambda t: t, **bad)
