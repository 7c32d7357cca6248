"""The outcome of a decision: actions to carry out, the status to write, events to post."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sluice_operator.manifests import Manifest, Run
from sluice_operator.models import SavepointStatus


@dataclass(frozen=True)
class Event:
    type: str  # Normal or Warning
    reason: str
    message: str
    savepoint: str | None = None  # post on this Savepoint instead of the StreamJob
    uid: str | None = None  # of that Savepoint: `kubectl describe` finds events by uid


@dataclass(frozen=True)
class StartRun:
    run: Run


@dataclass(frozen=True)
class DeletePods:
    names: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class CreateSavepoint:
    manifest: Manifest


@dataclass(frozen=True)
class TriggerSavepoint:
    name: str
    stop: str | bool  # the REST body's "stop": false, "suspend" or "terminate"
    target_directory: str
    job_id: str


@dataclass(frozen=True)
class PatchSavepoint:
    name: str
    status: SavepointStatus


@dataclass(frozen=True)
class DeleteSavepoint:
    name: str
    reason: str


@dataclass(frozen=True)
class SetDesiredState:
    """A user's stop Savepoint decides the job's desired state: the operator writes it into the spec."""

    state: str
    savepoint: str


@dataclass(frozen=True)
class LabelSavepoint:
    name: str
    labels: dict[str, str]


Action = (
    StartRun
    | DeletePods
    | CreateSavepoint
    | TriggerSavepoint
    | PatchSavepoint
    | DeleteSavepoint
    | (SetDesiredState | LabelSavepoint)
)


@dataclass
class Plan:
    status: dict[str, Any]
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    requeue_s: float | None = None  # come back sooner than the regular timer

    def soon(self, seconds: float) -> None:
        self.requeue_s = seconds if self.requeue_s is None else min(self.requeue_s, seconds)
