"""Reconcile logic: observe -> validate -> decide -> act -> status, for StreamJobs and Savepoints."""

from .lifecycle import Finalized, dispose_savepoint, finalize_job, reconcile_savepoint
from .observe import Deps
from .plan import Event
from .reconcile import Outcome, reconcile_job
from .rest import session

__all__ = [
    "Deps",
    "Event",
    "Finalized",
    "Outcome",
    "dispose_savepoint",
    "finalize_job",
    "reconcile_job",
    "reconcile_savepoint",
    "session",
]
