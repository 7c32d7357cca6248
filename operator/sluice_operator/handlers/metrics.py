"""Prometheus metrics of the operator, served on /metrics.

Every replica serves its own. Under leader election only the active replica reconciles: a standby's
reconcile counters stand still, and it exports no lifecycle series (a replica forgets a job when it stops
watching it), so summing the lifecycle gauge over all replicas counts every job once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from prometheus_client import Counter, Gauge, Histogram, Info, start_http_server

from sluice_operator.models import LifecycleState

RECONCILES = Counter(
    "sluice_operator_reconciles_total",
    "Reconciles by resource and outcome (ok, error).",
    ["resource", "outcome"],
)
RECONCILE_SECONDS = Histogram("sluice_operator_reconcile_seconds", "Duration of a reconcile.", ["resource"])
LIFECYCLE = Gauge(
    "sluice_operator_streamjobs",
    "StreamJobs this replica manages, by namespace and lifecycle state.",
    ["namespace", "lifecycle"],
)
MANAGED = Gauge(
    "sluice_operator_managed_streamjobs",
    "StreamJobs this replica watches right now (0 on a standby paused by leader election).",
)
SAVEPOINTS = Counter(
    "sluice_operator_savepoints_total", "Savepoints that reached a final state, by state.", ["state"]
)
EVENTS = Counter(
    "sluice_operator_events_total", "Kubernetes events posted, by type and reason.", ["type", "reason"]
)
PEERING = Info(
    "sluice_operator_peering",
    "This replica's identity, kopf peering object (empty when standalone) and peering priority.",
)

_lifecycles: dict[tuple[str, str], str] = {}


def record_lifecycle(namespace: str, name: str, lifecycle: str | None) -> None:
    """Remember a job's lifecycle state (None: the job is gone) and refresh its namespace's series."""
    key = (namespace, name)
    if lifecycle is None:
        _lifecycles.pop(key, None)
    else:
        _lifecycles[key] = lifecycle
    states = [state for (ns, _), state in _lifecycles.items() if ns == namespace]
    for state in LifecycleState:
        if states:
            LIFECYCLE.labels(namespace, state.value).set(states.count(state.value))
        else:
            # No job left: drop the namespace's series rather than export zeros forever.
            with contextlib.suppress(KeyError):  # never exported
                LIFECYCLE.remove(namespace, state.value)


def record_identity(identity: str, peering: str | None, priority: int | None) -> None:
    PEERING.info(
        {
            "identity": identity,
            "peering": peering or "",
            "priority": "" if priority is None else str(priority),
        }
    )


def serve(port: int) -> Callable[[], None]:
    """Serves /metrics on `port` (0: not at all); returns what stops serving."""
    if port <= 0:
        return lambda: None
    server, thread = start_http_server(port)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join()

    return stop
