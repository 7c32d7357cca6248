"""The runtime's states and modes: they are the contract's (`sluice_contract.states`), which the
operator reads too. Kept under this name because the whole runtime imports them from here."""

from sluice_contract.states import (
    CheckpointKind,
    CheckpointStatus,
    JobState,
    RestartKind,
    StopMode,
    SubtaskState,
)

__all__ = ["CheckpointKind", "CheckpointStatus", "JobState", "RestartKind", "StopMode", "SubtaskState"]
