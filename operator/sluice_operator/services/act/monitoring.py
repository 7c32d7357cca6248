"""The job's PodMonitor (with the operator's PodMonitor option): kept in place on every reconcile.

The CRD is prometheus-operator's, not Sluice's: it may be missing, of another version, or the operator
may lack the rights to it. None of that stops the job: the `Monitored` condition says what is wrong,
with one Warning event when that changes, and a reconcile at most CRD_RECHECK_S later looks again (so
installing the CRD later is enough).
"""

from __future__ import annotations

import time
from typing import Any

from sluice_operator import manifests as m
from sluice_operator.kube import Kube, Refused
from sluice_operator.models import MonitorReason, PodMonitorConfig

from ..common.acted import MonitorState
from ..common.objects import ObjectMeta

_CHART_VALUE = "metrics.jobs.podMonitor.enabled"
# How long a missing CRD is taken as missing before the API server is asked again. The CRD is
# cluster-wide: without this, every job would try (and fail) a GET and a create on every reconcile.
CRD_RECHECK_S = 30.0


class _CrdAbsence:
    def __init__(self) -> None:
        self.until = 0.0

    def known(self) -> bool:
        return time.monotonic() < self.until

    def seen(self) -> None:
        self.until = time.monotonic() + CRD_RECHECK_S


_ABSENT = _CrdAbsence()


def forget_crd_absence() -> None:
    """Look for the CRD again at the next reconcile (an operator starting knows nothing of it yet)."""
    _ABSENT.until = 0.0


_API = (m.POD_MONITOR_GROUP, m.POD_MONITOR_VERSION, m.POD_MONITOR_PLURAL)


async def ensure_pod_monitor(kube: Kube, owner: m.Owner, config: PodMonitorConfig) -> MonitorState:
    want = m.pod_monitor(owner, config)
    name = m.pod_monitor_name(owner.name)
    if _ABSENT.known():
        return _refusal(Refused(404, "not found"), name)
    try:
        found = await kube.get_object(*_API, owner.namespace, name)
        if found is None:
            try:
                await kube.create_object(*_API, want)
            except Refused as refused:
                if refused.status == 404:  # a create finds no such object only if the type is missing
                    _ABSENT.seen()
                raise
            return MonitorState(
                True, MonitorReason.CREATED, f"PodMonitor {name} scrapes {m.POD_MONITOR_PATH}"
            )
        found_meta = ObjectMeta.parse(found)
        if not found_meta.owned_by(owner.uid):
            return MonitorState(
                False,
                MonitorReason.CONFLICT,
                f"PodMonitor {name} exists but does not belong to StreamJob {owner.name}: delete or rename "
                "it and the operator creates the job's own",
            )
        labels = found_meta.labels
        if not _within(want["spec"], found.get("spec")) or not _within(want["metadata"]["labels"], labels):
            # A changed option (labels, interval) or an edited PodMonitor: the operator's fields win.
            patch = {"metadata": {"labels": want["metadata"]["labels"]}, "spec": want["spec"]}
            await kube.patch_object(*_API, owner.namespace, name, patch)
    except Refused as refused:
        return _refusal(refused, name)
    return MonitorState(True, MonitorReason.READY, f"PodMonitor {name} scrapes {m.POD_MONITOR_PATH}")


async def delete_pod_monitor(kube: Kube, owner: m.Owner) -> None:
    """With the job: a missing CRD, or rights the operator lacks, leave nothing to delete."""
    name = m.pod_monitor_name(owner.name)
    try:
        found = await kube.get_object(*_API, owner.namespace, name)
        if found is not None and ObjectMeta.parse(found).owned_by(owner.uid):
            await kube.delete_object(*_API, owner.namespace, name)  # not someone else's of the name
    except Refused:
        return


def _refusal(refused: Refused, name: str) -> MonitorState:
    if refused.status == 404:
        return MonitorState(
            False,
            MonitorReason.CRD_MISSING,
            f"no PodMonitor {name}: the CRD {m.POD_MONITOR_CRD} (prometheus-operator) is not installed. "
            f"Install prometheus-operator, or turn {_CHART_VALUE} off; the job runs either way",
        )
    if refused.status == 422:
        return MonitorState(
            False,
            MonitorReason.INVALID,
            f"PodMonitor {name} was refused by the API server: {refused}. The installed PodMonitor CRD may "
            f"be older than the operator expects; turn {_CHART_VALUE} off or upgrade prometheus-operator; "
            "the job runs either way",
        )
    return MonitorState(
        False,
        MonitorReason.FORBIDDEN,
        f"no PodMonitor {name}: the operator may not manage {m.POD_MONITOR_CRD} ({refused}). The chart "
        f"grants it with {_CHART_VALUE}=true; the job runs either way",
    )


def _within(want: Any, found: Any) -> bool:
    """`want` is in `found`: fields the API server or others added (defaults, annotations) don't count."""
    if isinstance(want, dict):
        return isinstance(found, dict) and all(_within(v, found.get(k)) for k, v in want.items())
    if isinstance(want, list):
        return (
            isinstance(found, list)
            and len(want) == len(found)
            and all(_within(w, f) for w, f in zip(want, found, strict=True))
        )
    return bool(want == found)


__all__ = [
    "delete_pod_monitor",
    "ensure_pod_monitor",
    "forget_crd_absence",
]
