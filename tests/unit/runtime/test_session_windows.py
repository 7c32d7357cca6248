"""Session windows, allowed lateness, late data and ProcessWindowFunction in KeyedWindowOperator, driven
directly, against results computed in plain Python, with the windows on either state backend."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import sluice
from sluice.checkpoint.restore import restored_share
from sluice.checkpoint.snapshot import RestoredState
from sluice.engine.events import MAX_WATERMARK
from sluice.engine.operators.keyed_window import KeyedWindowOperator
from sluice.state.keyed import BACKENDS
from sluice.state.keygroups import key_group_for, subtask_for_key_group
from sluice.windows import EventTimeSessionWindows, TimeWindow, TumblingEventTimeWindows

from ._support import start, write_checkpoint

Record = tuple[str, int]  # (key, amount)
GAP = 100


def add(a: Record, b: Record) -> Record:
    return (a[0], a[1] + b[1])


class SumCount(sluice.AggregateFunction):
    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def add(self, value: Record, accumulator: list[int]) -> list[int]:
        accumulator[0] += value[1]  # in place: copy-on-write must protect snapshots from this
        accumulator[1] += 1
        return accumulator

    def get_result(self, accumulator: list[int]) -> tuple[int, int]:
        return (accumulator[0], accumulator[1])

    def merge(self, first: list[int], second: list[int]) -> list[int]:
        return [first[0] + second[0], first[1] + second[1]]


class Describe(sluice.ProcessWindowFunction):
    def process(self, key: Any, window: TimeWindow, elements: list[Any]) -> Iterator[Any]:
        yield (key, window.start, window.end, sorted(a for _, a in elements))


def sessions_reference(records: list[tuple[Record, int]], gap: int) -> list[tuple[str, int, int, list[int]]]:
    """Per key: sort by time, a record within `gap` of the session's last record (or exactly at its end)
    extends it; (key, start, end, sorted amounts)."""
    by_key: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for (key, amount), ts in records:
        by_key[key].append((ts, amount))
    out = []
    for key, items in by_key.items():
        items.sort()
        start, end, amounts = items[0][0], items[0][0] + gap, [items[0][1]]
        for ts, amount in items[1:]:
            if ts <= end:
                end = max(end, ts + gap)
                amounts.append(amount)
            else:
                out.append((key, start, end, sorted(amounts)))
                start, end, amounts = ts, ts + gap, [amount]
        out.append((key, start, end, sorted(amounts)))
    return sorted(out)


def make_records(count: int, seed: int) -> list[tuple[Record, int]]:
    rng = random.Random(seed)
    return [((rng.choice("abcde"), rng.randint(1, 9)), rng.randint(0, 20_000)) for _ in range(count)]


def feed(op: KeyedWindowOperator, records: list[tuple[Record, int]], batch: int = 23) -> None:
    for i in range(0, len(records), batch):
        chunk = records[i : i + batch]
        op.process_batch([r for r, _ in chunk], [ts for _, ts in chunk])


def session_op(kind: str, lateness: int = 0, late_tag: str | None = None) -> KeyedWindowOperator:
    assigner = EventTimeSessionWindows.with_gap_millis(GAP)
    functions: dict[str, Any] = {"reduce": {"reduce": add}, "aggregate": {"aggregate": SumCount()}}
    function = functions.get(kind, {"process": Describe()})
    return KeyedWindowOperator(
        "sessions", assigner, lambda r: r[0], allowed_lateness_ms=lateness, late_tag=late_tag, **function
    )


def expected(kind: str, reference: list[tuple[str, int, int, list[int]]]) -> Counter[Any]:
    """What the operator emits for `reference`'s sessions: (result, end - 1), counted."""
    if kind == "reduce":
        return Counter(((k, sum(a)), end - 1) for k, _, end, a in reference)
    if kind == "aggregate":
        return Counter(((sum(a), len(a)), end - 1) for _, _, end, a in reference)
    return Counter(((k, s, e, tuple(a)), e - 1) for k, s, e, a in reference)


def freeze(value: Any) -> Any:
    return tuple(freeze(v) for v in value) if isinstance(value, list | tuple) else value


KINDS = ["reduce", "aggregate", "process"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The state backend the operators under test keep their windows in."""
    monkeypatch.setenv("SLUICE_STATE_DIR", str(tmp_path / "local-state"))
    kind: str = request.param
    return kind


def stored(op: KeyedWindowOperator) -> dict[Any, Any]:
    """Every key's windows as the operator's state holds them."""
    return dict(op.windows.items())


@pytest.mark.parametrize("kind", KINDS)
def test_sessions_in_any_order_match_the_reference(kind: str, backend: str) -> None:
    records = make_records(600, seed=3)
    op = session_op(kind)
    out, ctx = start(op, state_backend=backend)
    feed(op, records)
    assert out.events == []
    op.process_watermark(MAX_WATERMARK)
    got = Counter((freeze(v), ts) for v, ts in out.timestamped)
    assert got == expected(kind, sessions_reference(records, GAP))
    assert ctx.metrics.late_records_dropped == 0
    assert stored(op) == {}, "fired sessions without lateness leave no state"


def test_a_record_bridging_two_sessions_merges_them_and_their_contents(backend: str) -> None:
    op = session_op("process")
    out, _ = start(op, state_backend=backend)
    op.process_batch([("a", 1), ("a", 2)], [0, 250])  # [0, 100) and [250, 350)
    assert len(stored(op)["a"]) == 2
    op.process_batch([("a", 3)], [120])  # [120, 220) touches neither... but 220 < 250: still apart
    assert len(stored(op)["a"]) == 3
    op.process_batch([("a", 4)], [100])  # [100, 200) touches [0, 100) and overlaps [120, 220)
    op.process_batch([("a", 5)], [200])  # [200, 300): bridges [0, 220) and [250, 350)
    assert [w[:2] for w in stored(op)["a"]] == [[0, 350]]
    op.process_watermark(MAX_WATERMARK)
    assert out.timestamped == [(("a", 0, 350, [1, 2, 3, 4, 5]), 349)]


def test_watermarks_fire_sessions_once_their_gap_has_passed(backend: str) -> None:
    op = session_op("reduce")
    out, _ = start(op, state_backend=backend)
    op.process_batch([("a", 1), ("b", 1), ("a", 1)], [0, 50, 90])
    op.process_watermark(148)
    assert out.records == []
    op.process_watermark(188)  # session b is [50, 150)
    assert out.timestamped == [(("b", 1), 149)]
    op.process_watermark(189)  # session a is [0, 190)
    assert out.timestamped == [(("b", 1), 149), (("a", 2), 189)]
    op.process_watermark(MAX_WATERMARK)
    assert len(out.records) == 2


def test_late_record_within_lateness_fires_again_and_past_it_goes_to_the_side_output(backend: str) -> None:
    op = session_op("reduce", lateness=500, late_tag="late")
    out, ctx = start(op, state_backend=backend)
    op.process_batch([("a", 1)], [0])  # [0, 100)
    op.process_watermark(200)
    assert out.timestamped == [(("a", 1), 99)]
    op.process_batch([("a", 10)], [50])  # extends the fired session to [0, 150), still passed: fires
    assert out.timestamped[-1] == (("a", 11), 149)
    op.process_batch([("a", 100)], [80])  # [80, 180) extends the fired session to [0, 180): fires now
    assert out.timestamped[-1] == (("a", 111), 179)
    assert ctx.metrics.late_records_refired == 2
    op.process_watermark(679)  # 179 + 500: the session is cleaned up
    assert stored(op) == {}
    op.process_batch([("a", 1000)], [60])  # too late for any session: side output, nothing fires
    assert out.side == {"late": [(("a", 1000), 60)]}
    assert ctx.metrics.late_records_side_output == 1
    assert ctx.metrics.late_records_dropped == 0
    assert len(out.records) == 3


def test_without_lateness_a_record_of_a_fired_session_is_dropped_and_counted(backend: str) -> None:
    op = session_op("aggregate")
    out, ctx = start(op, state_backend=backend)
    op.process_batch([("a", 1)], [0])
    op.process_watermark(100)
    op.process_batch([("a", 1)], [0])
    assert ctx.metrics.late_records_dropped == 1
    # A record whose own session is still open is not late, even before earlier watermarks' sessions.
    op.process_batch([("a", 2)], [50])  # [50, 150) is not late at watermark 100
    op.process_watermark(MAX_WATERMARK)
    assert out.records == [(1, 1), (2, 1)]


def test_tumbling_windows_with_lateness_and_a_process_function(backend: str) -> None:
    op = KeyedWindowOperator(
        "tumbling",
        TumblingEventTimeWindows.of_millis(1000),
        lambda r: r[0],
        process=Describe(),
        allowed_lateness_ms=1000,
    )
    out, ctx = start(op, state_backend=backend)
    op.process_batch([("a", 1), ("a", 2), ("b", 3)], [10, 999, 1500])
    op.process_watermark(1200)
    assert out.timestamped == [(("a", 0, 1000, [1, 2]), 999)]
    op.process_batch([("a", 5)], [500])
    assert out.timestamped[-1] == (("a", 0, 1000, [1, 2, 5]), 999)
    op.process_watermark(1999)  # b's [1000, 2000) fires; a's [0, 1000) is cleaned up
    assert out.timestamped[-1] == (("b", 1000, 2000, [3]), 1999)
    assert "a" not in stored(op)
    op.process_batch([("a", 7)], [999])
    assert ctx.metrics.late_records_dropped == 1


def run_through(op: KeyedWindowOperator, records: list[tuple[Record, int]]) -> None:
    feed(op, records)
    for watermark in (12_000, 16_000, MAX_WATERMARK):
        op.process_watermark(watermark)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("written", "restored"), [(a, b) for a in BACKENDS for b in BACKENDS])
def test_snapshot_and_restore_at_another_parallelism_gives_the_same_results(
    kind: str, written: str, restored: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot of either backend restores into either (a job may switch backends between runs)."""
    monkeypatch.setenv("SLUICE_STATE_DIR", str(tmp_path / "local-state"))
    records = make_records(500, seed=11)
    first = [r for r in records if r[1] < 10_000]
    rest = [r for r in records if r[1] >= 9_000]  # some fall into sessions that fired: lateness
    whole = session_op(kind, lateness=3000)
    whole_out, _ = start(whole)
    feed(whole, first)
    whole.process_watermark(9_500)
    run_through(whole, rest)

    before = session_op(kind, lateness=3000)
    before_out, _ = start(before, state_backend=written)
    feed(before, first)
    before.process_watermark(9_500)
    snapshot = before.snapshot_state(checkpoint_id=1)
    assert snapshot is not None and snapshot.deferred is not None
    # As the task does before it processes the next record: a full snapshot's view is readable now.
    snapshot.deferred.snapshot.open_view()
    emitted = len(before_out.timestamped)
    # Writes while the snapshot is held (one into a fired session): copy-on-write keeps them out of it.
    before.process_batch([(r[0], 1000) for r, _ in first[:50]], [ts for _, ts in first[:50]])
    metadata = write_checkpoint(tmp_path, "sessions", {0: snapshot}, 1, keyed=True)

    combined = list(before_out.timestamped[:emitted])
    for subtask in range(3):
        share = restored_share(metadata, "sessions", subtask, 3, 128)
        assert isinstance(share, RestoredState)
        after = session_op(kind, lateness=3000)
        after_out, _ = start(after, restored=share, subtask=subtask, parallelism=3, state_backend=restored)
        mine = [r for r in rest if subtask_for_key_group(key_group_for(r[0][0], 128), 128, 3) == subtask]
        # Restored, the operator's watermark starts low again: sessions that fired before the snapshot
        # must not fire a second time when the first watermark comes.
        after.process_watermark(9_500)
        run_through(after, mine)
        combined.extend(after_out.timestamped)
    got = Counter((freeze(v), ts) for v, ts in combined)
    assert got == Counter((freeze(v), ts) for v, ts in whole_out.timestamped)
