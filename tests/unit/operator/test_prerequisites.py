"""What must be in place before a job is observed: decided as a plan, carried out by the act step."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, cast

import aiohttp
import pytest

from sluice_operator.kube import Kube, Refused
from sluice_operator.manifests import Owner
from sluice_operator.models import MonitorReason, OperatorConfig, PodMonitorConfig
from sluice_operator.services.act.auth import JobSecretError
from sluice_operator.services.act.execute import execute
from sluice_operator.services.act.monitoring import forget_crd_absence
from sluice_operator.services.clients.deps import Deps
from sluice_operator.services.common.acted import Executed, SecretReady
from sluice_operator.services.common.observed import Observed
from sluice_operator.services.common.plan import EnsureJobSecret, EnsurePodMonitor, EnsureStateKey, Event
from sluice_operator.services.decide.job import prerequisites

from ._fixtures import CONFIG, OWNER


class _Cluster:
    """The Secret and PodMonitor calls of `Kube`, on dicts; events are recorded, never expected."""

    def __init__(self) -> None:
        self.secrets: dict[str, tuple[list[str], dict[str, str]]] = {}
        self.created: list[str] = []
        self.events: list[Event] = []

    async def secret(self, namespace: str, name: str) -> tuple[list[str], dict[str, str]] | None:
        return self.secrets.get(f"{namespace}/{name}")

    async def create(self, manifest: dict[str, Any]) -> None:
        meta = manifest["metadata"]
        self.created.append(meta["name"])
        owners = [ref["uid"] for ref in meta.get("ownerReferences", [])]
        self.secrets.setdefault(f"{meta['namespace']}/{meta['name']}", (owners, dict(manifest["stringData"])))

    async def get_object(self, *_: Any) -> None:
        raise Refused(404, "the server could not find the requested resource")

    async def create_object(self, *_: Any) -> None:
        raise Refused(404, "the server could not find the requested resource")

    def post(self, job: Owner, event: Event) -> None:
        self.events.append(event)


def _act(cluster: _Cluster, config: OperatorConfig) -> Executed:
    async def go() -> Executed:
        async with aiohttp.ClientSession() as http:
            deps = Deps(cast(Kube, cluster), http, cluster.post)
            return await execute(deps, Observed(), prerequisites(config), OWNER)

    return asyncio.run(go())


def test_the_job_secret_comes_first_then_the_state_key_and_the_pod_monitor_only_with_the_option() -> None:
    assert prerequisites(CONFIG).actions == [EnsureJobSecret(), EnsureStateKey()]
    monitored = dataclasses.replace(CONFIG, pod_monitor=PodMonitorConfig())
    assert prerequisites(monitored).actions == [
        EnsureJobSecret(),
        EnsureStateKey(),
        EnsurePodMonitor(PodMonitorConfig()),
    ]


def test_acting_on_them_twice_creates_each_secret_once_and_hands_back_the_same_token() -> None:
    cluster = _Cluster()
    first, again = _act(cluster, CONFIG), _act(cluster, CONFIG)
    assert first.rest_token is not None and first.rest_token == again.rest_token
    assert cluster.created == ["counts-auth", "sluice-state-key"]
    assert first.monitor is None and cluster.events == []
    (ready,) = [r for r in first.results if isinstance(r, SecretReady)]
    assert first.rest_token not in repr(ready), "the token stays out of logs"


def test_a_secret_of_someone_else_stops_the_plan_before_anything_else_is_made() -> None:
    cluster = _Cluster()
    cluster.secrets["jobs/counts-auth"] = (["other-uid"], {"rest-token": "t", "spark-secret": "s"})
    with pytest.raises(JobSecretError, match="does not belong to StreamJob counts"):
        _act(cluster, CONFIG)
    assert cluster.created == [], "the state key is not made for a job that cannot run"


def test_a_missing_pod_monitor_crd_is_a_result_to_record_not_an_error() -> None:
    forget_crd_absence()
    executed = _act(_Cluster(), dataclasses.replace(CONFIG, pod_monitor=PodMonitorConfig()))
    assert executed.rest_token is not None
    assert executed.monitor is not None and not executed.monitor.ok
    assert executed.monitor.reason is MonitorReason.CRD_MISSING
    forget_crd_absence()
