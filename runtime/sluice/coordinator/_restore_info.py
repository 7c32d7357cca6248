"""What a job restored its state from, and how a restore failed: for stderr, GET /v1/job, the dashboard.

A restore that fails on storage (every retained checkpoint damaged, the store unreachable) is not an end
of the job: the job master ends the run SUSPENDED, stores no result, and the job id stays resumable once
the storage is repaired.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from sluice._states import CheckpointKind, JobState
from sluice.checkpoint.metadata import CheckpointMetadata
from sluice.coordinator._attempt_events import AttemptFailed
from sluice_contract.codec import Document, wire

log = logging.getLogger("sluice.coordinator.jobmaster")  # beside the job master's other restore messages


@dataclass(frozen=True)
class RestoredFrom(Document):
    """The checkpoint or savepoint an attempt restored, and the operator state it dropped (GET /v1/job's
    `restoredFrom`)."""

    path: str
    kind: CheckpointKind
    checkpoint_id: int
    attempt: int
    dropped_uids: tuple[str, ...] = field(default=(), metadata=wire(name="droppedOperators"))
    """Operators in the snapshot the job no longer has, whose state --allow-non-restored-state dropped."""

    @staticmethod
    def of(metadata: CheckpointMetadata, attempt: int, dropped: list[str]) -> RestoredFrom:
        """What an attempt restores; logs the state it drops, which is lost for good."""
        if dropped:
            log.warning(
                "restoring %s without the state of operators the job no longer has "
                "(--allow-non-restored-state): %s",
                metadata.location,
                ", ".join(dropped),
            )
        return RestoredFrom(metadata.location, metadata.kind, metadata.checkpoint_id, attempt, tuple(dropped))

    def describe(self) -> str:
        text = f"restored from {self.kind} {self.checkpoint_id} at {self.path}"
        if self.dropped_uids:
            text += (
                f"; dropped the state of operators the job no longer has (--allow-non-restored-state): "
                f"{', '.join(self.dropped_uids)}"
            )
        return text


@dataclass(frozen=True)
class RestoreFailed(AttemptFailed):
    """An attempt could not restore its state from storage. `permanent`: the snapshot is damaged, so
    retrying cannot help; otherwise (storage unreachable) the restart strategy retries it."""

    permanent: bool = False

    @property
    def end(self) -> JobState:
        return JobState.SUSPENDED
