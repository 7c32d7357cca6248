"""The finalizer's deletions: decided as a plan (`teardown`), carried out by the act step."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, cast

import aiohttp

from sluice_operator.kube import Kube
from sluice_operator.manifests import Owner
from sluice_operator.models import PodMonitorConfig
from sluice_operator.services.act.execute import execute
from sluice_operator.services.clients.deps import Deps
from sluice_operator.services.common.observed import Observed
from sluice_operator.services.common.plan import Action, DeleteOwned, Event, Plan
from sluice_operator.services.decide.deletion import teardown

from ._fixtures import CONFIG, OWNER

_EXECUTOR = "counts-taskmanager-1"  # an executor pod left over


class _Deleting:
    """The delete calls of `Kube`, recorded in order; a PodMonitor found is the job's own."""

    def __init__(self) -> None:
        self.deleted: list[tuple[str, str]] = []

    async def delete_pod(self, namespace: str, name: str) -> None:
        self.deleted.append(("Pod", name))

    async def delete(self, kind: str, namespace: str, name: str) -> None:
        self.deleted.append((kind, name))

    async def delete_custom(self, plural: str, namespace: str, name: str) -> None:
        self.deleted.append((plural, name))

    async def get_object(self, *_: Any) -> dict[str, Any]:
        return {"metadata": {"ownerReferences": [{"uid": OWNER.uid}]}}

    async def delete_object(self, group: str, version: str, plural: str, namespace: str, name: str) -> None:
        self.deleted.append((plural, name))

    def post(self, job: Owner, event: Event) -> None:
        raise AssertionError(f"deleting says nothing of its own, got {event}")


def test_teardown_deletes_the_pods_then_what_the_runs_made_and_the_secret() -> None:
    actions = teardown(CONFIG, OWNER, [_EXECUTOR]).actions
    assert actions == [
        DeleteOwned("Pod", "counts-taskmanager-1"),
        DeleteOwned("Service", "counts-rest"),
        DeleteOwned("ConfigMap", "counts-config"),
        DeleteOwned("RoleBinding", "counts-driver"),
        DeleteOwned("Role", "counts-driver"),
        DeleteOwned("ServiceAccount", "counts-driver"),
        DeleteOwned("Secret", "counts-auth"),
    ]


def test_network_policy_and_pod_monitor_only_with_their_options() -> None:
    config = dataclasses.replace(CONFIG, network_policies=True, pod_monitor=PodMonitorConfig())
    kinds = [a.kind for a in teardown(config, OWNER, []).actions if isinstance(a, DeleteOwned)]
    assert kinds[-2:] == ["NetworkPolicy", "PodMonitor"]


def test_the_act_step_deletes_each_kind_the_way_its_api_needs() -> None:
    kube = _Deleting()
    actions: list[Action] = [
        DeleteOwned("Savepoint", "counts-upgrade-3"),
        DeleteOwned("Pod", "counts-coordinator"),
        DeleteOwned("Service", "counts-rest"),
        DeleteOwned("PodMonitor", "counts-coordinator"),
    ]

    async def go() -> None:
        async with aiohttp.ClientSession() as http:
            deps = Deps(cast(Kube, kube), http, kube.post)
            await execute(deps, Observed(), Plan(actions=list(actions)), OWNER)

    asyncio.run(go())
    assert kube.deleted == [
        ("savepoints", "counts-upgrade-3"),
        ("Pod", "counts-coordinator"),
        ("Service", "counts-rest"),
        ("podmonitors", "counts-coordinator"),
    ]
