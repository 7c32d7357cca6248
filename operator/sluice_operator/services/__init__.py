"""Reconcile logic: observe -> validate -> decide -> act -> record, for StreamJobs and Savepoints."""

from .deletion import finalize_job
from .observe import Deps
from .outcome import Finalized, Outcome
from .plan import Event
from .reconcile import reconcile_job
from .rest import session
from .savepoint_resource import dispose_savepoint, reconcile_savepoint

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
