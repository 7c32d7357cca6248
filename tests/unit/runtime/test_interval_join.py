"""The interval join against a nested loop: its bounds, late rows, cleanup to empty state, and a restore at
another parallelism, on both state backends."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.checkpoint.restore import restored_share
from sluice.checkpoint.snapshot import RestoredState
from sluice.engine.events import MAX_WATERMARK, MIN_WATERMARK
from sluice.engine.operators.interval_join import IntervalJoin, IntervalJoinOperator
from sluice.state.keyed import BACKENDS
from sluice.state.keygroups import key_group_for, subtask_for_key_group

from ._support import start, write_checkpoint

Row = tuple[str, int, int]
"""(key, timestamp, id): the id makes every row, and so every pair, distinct."""
Step = tuple[int, list[Row]] | int
"""A batch of rows from input 0 (left) or 1 (right), or a watermark."""


def join_op(lower: int, upper: int) -> IntervalJoinOperator:
    pair = IntervalJoin(lower, upper, lambda left, right: (left[2], right[2]))
    return IntervalJoinOperator("join", (lambda r: r[0], lambda r: r[0]), pair)


def run(op: IntervalJoinOperator, steps: list[Step]) -> None:
    for step in steps:
        if isinstance(step, int):
            op.process_watermark(step)
        else:
            side, rows = step
            op.process_input(side, list(rows), [r[1] for r in rows])


def reference(steps: list[Step], lower: int, upper: int) -> tuple[Counter[Any], int]:
    """The pairs (with their timestamps) of the rows that were not late when they came, and how many
    rows were late: a row earlier than the watermark is dropped, as in Flink."""
    watermark = MIN_WATERMARK
    kept: tuple[list[Row], list[Row]] = ([], [])
    late = 0
    for step in steps:
        if isinstance(step, int):
            watermark = max(watermark, step)
            continue
        side, rows = step
        for row in rows:
            if row[1] < watermark:
                late += 1
            else:
                kept[side].append(row)
    pairs = Counter(
        ((left[2], right[2]), max(left[1], right[1]))
        for left in kept[0]
        for right in kept[1]
        if left[0] == right[0] and left[1] + lower <= right[1] <= left[1] + upper
    )
    return pairs, late


def buffered(op: IntervalJoinOperator) -> int:
    """Keys that hold rows in either buffer."""
    backend = op.ctx.keyed_backend
    assert backend is not None
    return len(backend.keys("interval-join-left")) + len(backend.keys("interval-join-right"))


def drained_empty(op: IntervalJoinOperator) -> bool:
    op.process_watermark(MAX_WATERMARK)
    return buffered(op) == 0 and op.timers.event.entries() == []


def pairs_of(out: Any) -> Counter[Any]:
    return Counter(out.timestamped)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("SLUICE_STATE_DIR", str(tmp_path / "local-state"))
    kind: str = request.param
    return kind


rows_ids = iter(range(10**9))


@st.composite
def steps_and_bounds(draw: st.DrawFn) -> tuple[list[Step], int, int]:
    lower = draw(st.integers(-20, 20))
    upper = draw(st.integers(lower, lower + 30))
    steps: list[Step] = []
    for _ in range(draw(st.integers(1, 40))):
        if draw(st.booleans()):
            steps.append(draw(st.integers(0, 120)))
        else:
            rows = draw(
                st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 120)), min_size=1, max_size=4)
            )
            steps.append((draw(st.integers(0, 1)), [(key, ts, next(rows_ids)) for key, ts in rows]))
    return steps, lower, upper


@settings(max_examples=300, deadline=None)
@given(steps_and_bounds())
def test_pairs_match_a_nested_loop_over_the_rows_that_were_not_late(
    case: tuple[list[Step], int, int],
) -> None:
    """Any bounds (negative, zero width), rows out of order, several rows of one timestamp, watermarks
    anywhere: every pair of rows that came in time, once, with the later timestamp; nothing left after
    the end of input."""
    steps, lower, upper = case
    op = join_op(lower, upper)
    out, ctx = start(op)
    run(op, steps)
    expected, late = reference(steps, lower, upper)
    assert drained_empty(op)
    assert pairs_of(out) == expected
    assert ctx.metrics.late_records_dropped == late


@pytest.mark.parametrize("left_first", [True, False])
def test_rows_at_either_bound_pair_and_one_millisecond_outside_do_not(backend: str, left_first: bool) -> None:
    op = join_op(-5, 10)
    out, _ = start(op, state_backend=backend)
    left = [("k", 100, 0)]
    right = [("k", 94, 1), ("k", 95, 2), ("k", 110, 3), ("k", 111, 4)]
    steps: list[Step] = [(0, left), (1, right)] if left_first else [(1, right), (0, left)]
    run(op, steps)
    assert pairs_of(out) == Counter({((0, 2), 100): 1, ((0, 3), 110): 1})


def test_a_row_at_the_watermark_is_on_time_and_one_below_it_is_late(backend: str) -> None:
    op = join_op(0, 0)
    out, ctx = start(op, state_backend=backend)
    run(op, [(0, [("k", 50, 0)]), 50, (1, [("k", 50, 1), ("k", 49, 2)])])
    assert pairs_of(out) == Counter({((0, 1), 50): 1})
    assert ctx.metrics.late_records_dropped == 1


def test_rows_of_one_timestamp_pair_with_every_partner_and_leave_together(backend: str) -> None:
    op = join_op(-1, 1)
    out, _ = start(op, state_backend=backend)
    run(op, [(0, [("k", 10, 0), ("k", 10, 1)]), (0, [("k", 10, 2)]), (1, [("k", 11, 3), ("k", 9, 4)])])
    assert pairs_of(out) == Counter({((i, j), 11 if j == 3 else 10): 1 for i in range(3) for j in (3, 4)})
    # The left rows at 10 expire once the watermark passes 10 + 1; the right row at 9 once it passes 10.
    op.process_watermark(11)
    assert buffered(op) == 2
    op.process_watermark(12)
    assert buffered(op) == 1, "the right row at 11 waits for a left partner until the watermark passes 12"
    assert drained_empty(op)


def test_a_key_whose_buffers_emptied_joins_again_and_empties_again(backend: str) -> None:
    op = join_op(-3, 3)
    out, _ = start(op, state_backend=backend)
    run(op, [(0, [("k", 10, 0)]), (1, [("k", 12, 1)]), 20])
    assert buffered(op) == 0
    run(op, [(1, [("k", 30, 2)]), (0, [("k", 27, 3), ("k", 33, 4)]), 40])
    assert buffered(op) == 0
    assert pairs_of(out) == Counter({((0, 1), 12): 1, ((3, 2), 30): 1, ((4, 2), 33): 1})
    assert op.timers.event.entries() == []


def _rows(count: int, seed: int) -> Iterator[Step]:
    """Both inputs' rows in batches, slightly out of order, with the watermark 20 ms behind."""
    rand = random.Random(seed)
    for start_ts in range(0, count, 10):
        for side in (0, 1):
            batch = [
                (f"k{rand.randrange(7)}", ts + rand.randrange(-15, 5), next(rows_ids))
                for ts in range(start_ts, start_ts + 10)
            ]
            yield side, [r for r in batch if r[1] >= 0]
        yield start_ts - 20


@pytest.mark.parametrize(("written", "restored"), [(a, b) for a in BACKENDS for b in BACKENDS])
def test_restored_at_another_parallelism_the_join_goes_on_as_if_never_stopped(
    written: str, restored: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows and their cleanup timers move by key group: the three subtasks together make the pairs one
    operator makes without a stop, and each ends with empty state."""
    monkeypatch.setenv("SLUICE_STATE_DIR", str(tmp_path / "local-state"))
    steps = list(_rows(400, seed=5))
    # Split before a watermark: a restored operator's watermark starts low, and the first one it gets
    # must be the one the uninterrupted operator had, or rows late for one would be on time for the other.
    half = len(steps) // 2
    cut = next(i for i in range(half, len(steps)) if isinstance(steps[i], int))
    first, rest = steps[:cut], steps[cut:]
    whole = join_op(-12, 8)
    whole_out, _ = start(whole)
    run(whole, steps)
    whole.process_watermark(MAX_WATERMARK)

    before = join_op(-12, 8)
    before_out, _ = start(before, state_backend=written)
    run(before, first)
    snapshot = before.snapshot_state(checkpoint_id=1)
    assert snapshot is not None and snapshot.deferred is not None
    snapshot.deferred.snapshot.open_view()
    assert buffered(before) > 0, "the snapshot holds rows waiting for partners"
    metadata = write_checkpoint(tmp_path, "join", {0: snapshot}, 1, keyed=True)

    combined = pairs_of(before_out)
    for subtask in range(3):
        share = restored_share(metadata, "join", subtask, 3, 128)
        assert isinstance(share, RestoredState)
        after = join_op(-12, 8)
        after_out, _ = start(after, restored=share, subtask=subtask, parallelism=3, state_backend=restored)
        mine: list[Step] = []
        for step in rest:
            if isinstance(step, int):
                mine.append(step)
                continue
            owned = [r for r in step[1] if subtask_for_key_group(key_group_for(r[0], 128), 128, 3) == subtask]
            if owned:
                mine.append((step[0], owned))
        run(after, mine)
        assert drained_empty(after)
        combined += pairs_of(after_out)
    assert combined == pairs_of(whole_out)
    assert sum(combined.values()) > 100
