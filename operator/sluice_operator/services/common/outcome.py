"""What the services report to the handler layer: when to come back, and whether a finalizer is done.

Events are not in it: the recorder posted them where the plan was executed."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Outcome:
    """Of a StreamJob reconcile: next visit, metrics labels."""

    requeue_s: float | None = None
    lifecycle: str | None = None


@dataclass(frozen=True)
class Finalized:
    """Of a finalizer (a StreamJob's deletion, a Savepoint's disposal): done=True lets it go."""

    done: bool
    message: str = ""  # why it is not done yet


__all__ = ["Finalized", "Outcome"]
