"""Reconcile logic: observe -> validate -> decide -> act -> record, for StreamJobs and Savepoints."""

from .clients.rest import session
from .common.outcome import Finalized, Outcome
from .common.plan import Event
from .deletion import finalize_job
from .observe.job import Deps
from .reconcile import reconcile_job
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
