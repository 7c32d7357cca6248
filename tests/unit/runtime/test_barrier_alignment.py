"""Aligned barriers: when a subtask may snapshot, which channels are blocked, and what aborts an alignment."""

from __future__ import annotations

import time

import pytest

from sluice.checkpoint.barrier import BarrierTiming
from sluice.engine._alignment import BarrierAligner
from sluice.engine.events import CheckpointBarrier


def barrier(checkpoint_id: int) -> CheckpointBarrier:
    return CheckpointBarrier(checkpoint_id, 1_000 * checkpoint_id, f"file:///chk/chk-{checkpoint_id}")


def test_aligns_once_every_channel_delivered_the_barrier() -> None:
    aligner = BarrierAligner(3)
    first = aligner.on_barrier(1, barrier(1))
    assert first.aligned is None and first.aborted is None
    assert aligner.blocked == {1}
    assert aligner.on_barrier(0, barrier(1)).aligned is None
    assert aligner.blocked == {0, 1}
    done = aligner.on_barrier(2, barrier(1))
    assert done.aligned == barrier(1)
    assert aligner.blocked == set()


def test_single_channel_aligns_at_once() -> None:
    aligner = BarrierAligner(1)
    assert aligner.on_barrier(0, barrier(5)).aligned == barrier(5)


def test_a_barrier_already_aligned_is_ignored() -> None:
    aligner = BarrierAligner(2)
    aligner.on_barrier(0, barrier(1))
    assert aligner.on_barrier(1, barrier(1)).aligned == barrier(1)
    again = aligner.on_barrier(0, barrier(1))
    assert again.aligned is None and again.aborted is None
    assert aligner.blocked == set()


def test_newer_barrier_aborts_the_older_alignment() -> None:
    aligner = BarrierAligner(2)
    aligner.on_barrier(0, barrier(1))
    newer = aligner.on_barrier(1, barrier(2))
    assert newer.aborted == 1
    assert newer.aligned is None
    assert aligner.blocked == {1}  # only checkpoint 2's channel
    # Checkpoint 1's barrier still arriving on channel 1 is stale now.
    stale = aligner.on_barrier(1, barrier(1))
    assert stale.aligned is None and stale.aborted is None
    assert aligner.on_barrier(0, barrier(2)).aligned == barrier(2)


def test_closed_channel_counts_as_aligned_for_a_pending_checkpoint() -> None:
    aligner = BarrierAligner(3)
    aligner.on_barrier(0, barrier(1))
    aligner.on_barrier(1, barrier(1))
    assert aligner.on_channel_closed(2).aligned == barrier(1)
    assert aligner.blocked == set()


def test_closed_channel_counts_as_aligned_for_later_checkpoints() -> None:
    aligner = BarrierAligner(3)
    assert aligner.on_channel_closed(1).aligned is None  # no checkpoint pending: nothing to complete
    aligner.on_barrier(0, barrier(1))
    assert aligner.on_barrier(2, barrier(1)).aligned == barrier(1)
    aligner.on_channel_closed(2)
    assert aligner.on_barrier(0, barrier(2)).aligned == barrier(2)


def test_all_channels_closed() -> None:
    aligner = BarrierAligner(2)
    aligner.on_channel_closed(0)
    assert not aligner.all_closed
    aligner.on_channel_closed(1)
    assert aligner.all_closed


def test_trigger_with_every_input_closed_aligns_at_once() -> None:
    aligner = BarrierAligner(2)
    aligner.on_channel_closed(0)
    aligner.on_channel_closed(1)
    assert aligner.on_trigger(barrier(3)).aligned == barrier(3)


def test_trigger_waits_for_the_channels_still_closing() -> None:
    # Triggered directly: upstream has finished but its EndOfPartition is still on the way.
    aligner = BarrierAligner(3)
    aligner.on_channel_closed(0)
    triggered = aligner.on_trigger(barrier(4))
    assert triggered.aligned is None
    assert aligner.on_channel_closed(1).aligned is None
    assert aligner.on_channel_closed(2).aligned == barrier(4)


def test_trigger_completes_with_a_barrier_on_the_remaining_channel() -> None:
    aligner = BarrierAligner(2)
    aligner.on_channel_closed(0)
    assert aligner.on_trigger(barrier(2)).aligned is None
    assert aligner.on_barrier(1, barrier(2)).aligned == barrier(2)


def test_trigger_after_barriers_aligned_the_same_checkpoint_is_ignored() -> None:
    aligner = BarrierAligner(1)
    assert aligner.on_barrier(0, barrier(6)).aligned == barrier(6)
    late = aligner.on_trigger(barrier(6))
    assert late.aligned is None and late.aborted is None


def test_trigger_joins_an_alignment_of_the_same_checkpoint() -> None:
    aligner = BarrierAligner(2)
    aligner.on_barrier(0, barrier(7))
    joined = aligner.on_trigger(barrier(7))
    assert joined.aligned is None and joined.aborted is None
    assert aligner.on_channel_closed(1).aligned == barrier(7)


def test_trigger_of_a_newer_checkpoint_aborts_the_pending_one() -> None:
    aligner = BarrierAligner(2)
    aligner.on_barrier(0, barrier(1))
    newer = aligner.on_trigger(barrier(2))
    assert newer.aborted == 1
    assert newer.aligned is None
    assert aligner.blocked == set()


def test_cancel_unblocks_and_ignores_the_rest_of_that_checkpoint() -> None:
    aligner = BarrierAligner(2)
    aligner.on_barrier(0, barrier(1))
    assert aligner.on_cancel(1) is True
    assert aligner.blocked == set()
    late = aligner.on_barrier(1, barrier(1))
    assert late.aligned is None and late.aborted is None
    assert aligner.blocked == set()
    # The next checkpoint aligns normally.
    aligner.on_barrier(0, barrier(2))
    assert aligner.on_barrier(1, barrier(2)).aligned == barrier(2)


def test_cancel_before_any_barrier_arrived() -> None:
    aligner = BarrierAligner(2)
    assert aligner.on_cancel(3) is False
    assert aligner.on_barrier(0, barrier(3)).aligned is None
    assert aligner.blocked == set()
    assert aligner.on_barrier(1, barrier(3)).aligned is None


def test_cancel_of_another_checkpoint_keeps_the_alignment() -> None:
    aligner = BarrierAligner(2)
    aligner.on_barrier(0, barrier(5))
    assert aligner.on_cancel(4) is False
    assert aligner.blocked == {0}
    assert aligner.on_barrier(1, barrier(5)).aligned == barrier(5)


def test_times_the_start_delay_and_the_alignment_of_a_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [10.0]
    aligner = BarrierAligner(2, clock=lambda: now[0])
    # The coordinator triggered checkpoint 1 at wall time 1,000 ms; its first barrier comes 250 ms later.
    monkeypatch.setattr(time, "time", lambda: 1.25)
    assert aligner.on_barrier(0, barrier(1)).timing is None
    now[0] += 0.040
    done = aligner.on_barrier(1, barrier(1))
    assert done.timing == BarrierTiming(start_delay_ms=250.0, alignment_ms=40.0)


def test_a_barrier_stamped_by_a_clock_ahead_of_this_host_has_no_start_delay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(time, "time", lambda: 0.5)  # before the trigger's 1,000 ms
    done = BarrierAligner(1).on_barrier(0, barrier(1))
    assert done.timing is not None and done.timing.start_delay_ms == 0.0
    assert BarrierTiming.on_trigger(1_000) == BarrierTiming(0.0, 0.0)
