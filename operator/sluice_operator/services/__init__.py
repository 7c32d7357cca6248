"""Reconcile logic for StreamJobs and Savepoints, by role.

The entry points here (`reconcile`, `deletion`, `savepoint_resource`) run observe -> decide -> act:

- `observe/`: reading the world: the objects (parsed and validated), the job's pods and Secrets, the
  coordinator's REST API and storage;
- `decide/`: pure functions from what was observed to a `Plan` (status, actions, events);
- `act/`: carrying out a plan and recording it, the one writer of status and events;
- `clients/`: the coordinator's REST API and object storage, which observing and acting both use;
- `common/`: the data the steps hand each other.

The roles do not import each other; the import contracts in pyproject.toml hold them to it.
"""

from .clients.deps import Deps
from .clients.rest import session
from .common.outcome import Finalized, Outcome
from .common.plan import Event
from .deletion import finalize_job
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
