"""What the services report to the handler layer: the events to post and when to come back."""

from __future__ import annotations

from dataclasses import dataclass, field

from .plan import Event


@dataclass(frozen=True)
class Outcome:
    """Of a StreamJob reconcile: events (on the job or a Savepoint), next visit, metrics labels."""

    events: list[Event] = field(default_factory=list)
    requeue_s: float | None = None
    lifecycle: str | None = None
    uid: str | None = None  # of the StreamJob, for its events


@dataclass(frozen=True)
class Finalized:
    """Of a finalizer (a StreamJob's deletion, a Savepoint's disposal): done=True lets it go."""

    done: bool
    events: list[Event]
    message: str = ""  # why it is not done yet


__all__ = ["Finalized", "Outcome"]
