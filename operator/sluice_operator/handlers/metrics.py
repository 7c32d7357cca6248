"""Prometheus metrics of the operator, served on /metrics."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, start_http_server

from sluice_operator.models import LifecycleState

RECONCILES = Counter(
    "sluice_operator_reconciles_total",
    "Reconciles by resource and outcome (ok, error).",
    ["resource", "outcome"],
)
RECONCILE_SECONDS = Histogram("sluice_operator_reconcile_seconds", "Duration of a reconcile.", ["resource"])
LIFECYCLE = Gauge("sluice_operator_streamjobs", "StreamJobs by lifecycle state.", ["lifecycle"])
SAVEPOINTS = Counter(
    "sluice_operator_savepoints_total", "Savepoints that reached a final state, by state.", ["state"]
)
EVENTS = Counter(
    "sluice_operator_events_total", "Kubernetes events posted, by type and reason.", ["type", "reason"]
)

_lifecycles: dict[tuple[str, str], str] = {}


def record_lifecycle(namespace: str, name: str, lifecycle: str | None) -> None:
    key = (namespace, name)
    if lifecycle is None:
        _lifecycles.pop(key, None)
    else:
        _lifecycles[key] = lifecycle
    for state in LifecycleState:
        LIFECYCLE.labels(state.value).set(sum(1 for v in _lifecycles.values() if v == state.value))


def serve(port: int) -> None:
    if port > 0:
        start_http_server(port)
