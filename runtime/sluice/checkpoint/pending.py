"""A checkpoint while it is pending (the subtasks it still waits for) and once it has ended (its record)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from sluice._states import CheckpointKind, CheckpointStatus, StopMode
from sluice.checkpoint.acknowledgement import Acknowledgement
from sluice.checkpoint.metadata import CheckpointMetadata
from sluice.checkpoint.plan import CheckpointPlan, SubtaskId
from sluice_contract.rest import CheckpointSummary


class Waiting:
    """The subtasks a pending checkpoint still waits for, without a set entry per subtask."""

    def __init__(self, plan: CheckpointPlan) -> None:
        self._plan = plan
        self._acked: dict[int, set[int]] = {}
        self.remaining = plan.wait_count

    def __contains__(self, subtask: SubtaskId) -> bool:
        vertex, index = subtask
        return self._plan.waits_for(vertex, index) and index not in self._acked.get(vertex, ())

    def acknowledge(self, subtask: SubtaskId) -> None:
        if subtask in self:
            self._acked.setdefault(subtask[0], set()).add(subtask[1])
            self.remaining -= 1

    def __bool__(self) -> bool:
        return self.remaining > 0

    def __len__(self) -> int:
        return self.remaining

    def sample(self, limit: int) -> list[SubtaskId]:
        found: list[SubtaskId] = []
        for vertex, indices in self._plan.wait.items():
            for index in indices:
                if (vertex, index) in self and len(found) < limit:
                    found.append((vertex, index))
        return sorted(found)


@dataclass
class PendingCheckpoint:
    checkpoint_id: int
    kind: CheckpointKind
    location: str
    trigger_ms: int
    stop_mode: StopMode | None
    plan: CheckpointPlan
    waiting: Waiting
    acks: dict[SubtaskId, Acknowledgement] = field(default_factory=dict)
    done: asyncio.Future[CheckpointMetadata] | None = None
    """Its `_metadata` (with the location) once it completed; CheckpointDeclined when it failed."""
    finalizing: bool = False
    """Every acknowledgement is in and `_metadata` is being written: the finalizer owns the directory."""
    attempt_ended: str | None = None
    """Why the attempt ended while `_metadata` was being written."""

    @property
    def is_savepoint(self) -> bool:
        return self.kind == CheckpointKind.SAVEPOINT

    @property
    def commits(self) -> bool:
        """Whether completing it commits side effects (see `commits_side_effects`)."""
        return commits_side_effects(self.kind, self.stop_mode)


def commits_side_effects(kind: CheckpointKind, stop_mode: StopMode | None) -> bool:
    """Checkpoints and stop-with-savepoints commit two-phase-commit sinks; an intermediate savepoint does not.

    Recovery restores the latest checkpoint, never a savepoint: output committed by a savepoint taken
    after that checkpoint would be written again by the replay. Its pending commits stay in the sinks
    and go out with the next checkpoint (or when a job is started from the savepoint).
    """
    return kind != CheckpointKind.SAVEPOINT or stop_mode is not None


@dataclass(frozen=True)
class SnapshotStats:
    """What a completed checkpoint cost: the slowest subtask's synchronous part (record processing
    stopped) and asynchronous part (state written beside processing), the bytes all subtasks wrote for
    it and the size of all state it references (files shared with earlier checkpoints included), and the
    slowest subtask's start delay (trigger to first barrier) and alignment (first to last barrier)."""

    sync_ms: float = 0.0
    async_ms: float = 0.0
    bytes_written: int = 0
    state_size: int = 0
    start_delay_ms: float = 0.0
    alignment_ms: float = 0.0

    @staticmethod
    def of_acks(acks: Iterable[Acknowledgement]) -> SnapshotStats:
        sync = async_ = delay = alignment = 0.0
        written = size = 0
        for ack in acks:
            sync = max(sync, ack.sync_ms)
            async_ = max(async_, ack.async_ms)
            delay = max(delay, ack.start_delay_ms)
            alignment = max(alignment, ack.alignment_ms)
            for op in ack.operators:
                written += op.bytes_written
                size += op.state_size
        return SnapshotStats(
            round(sync, 3), round(async_, 3), written, size, round(delay, 3), round(alignment, 3)
        )


@dataclass
class CheckpointRecord:
    checkpoint_id: int
    kind: CheckpointKind
    status: CheckpointStatus
    trigger_ms: int
    completion_ms: int | None = None
    path: str | None = None
    error: str | None = None
    fully_finished: list[str] = field(default_factory=list)
    finished_subtasks: int = 0
    stats: SnapshotStats | None = None

    def summary(self) -> CheckpointSummary:
        """As the REST API shows it (`GET /v1/checkpoints`): what it cost once it completed."""
        summary = CheckpointSummary(
            self.checkpoint_id,
            self.kind,
            self.status,
            self.trigger_ms,
            self.completion_ms,
            self.path,
            self.error,
        )
        if self.status != CheckpointStatus.COMPLETED:
            return summary
        stats = self.stats or SnapshotStats()
        return replace(
            summary,
            fully_finished_operators=tuple(self.fully_finished),
            finished_subtasks=self.finished_subtasks,
            duration_ms=self.duration_ms,
            sync_ms=stats.sync_ms,
            async_ms=stats.async_ms,
            start_delay_ms=stats.start_delay_ms,
            alignment_ms=stats.alignment_ms,
            bytes_written=stats.bytes_written,
            state_size=stats.state_size,
        )

    def as_json(self) -> dict[str, Any]:
        return self.summary().to_json()

    @property
    def duration_ms(self) -> int | None:
        return None if self.completion_ms is None else self.completion_ms - self.trigger_ms
