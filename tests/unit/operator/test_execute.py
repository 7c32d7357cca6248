"""Acting on a plan: what `execute` writes for a trigger it cannot make, and what it hands back."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import aiohttp

from sluice_operator.kube import Kube
from sluice_operator.services.decide import decide
from sluice_operator.services.execute import Done, Refused, execute
from sluice_operator.services.observe import Deps
from sluice_operator.services.observed import Observed
from sluice_operator.services.plan import DeleteSavepoint, Plan, TriggerSavepoint
from sluice_operator.services.record import action_events

from ._fixtures import OWNER, spec
from ._situations import coordinator, ctx, deployed_status, pod, savepoint


class _Recording:
    """A Kube that records the writes: the savepoint status written is what this test checks."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, str, Any]] = []

    async def patch_status(self, plural: str, namespace: str, name: str, patch: Any) -> None:
        self.writes.append(("patch_status", name, patch))

    async def delete_custom(self, plural: str, namespace: str, name: str) -> None:
        self.writes.append(("delete_custom", name, None))


def _execute(plan: Plan, obs: Observed, kube: _Recording) -> Any:
    async def go() -> Any:
        async with aiohttp.ClientSession() as http:
            return await execute(Deps(cast(Kube, kube), http), obs, plan, OWNER)

    return asyncio.run(go())


def test_a_trigger_without_a_coordinator_ip_writes_the_decided_refusal_and_acting_goes_on() -> None:
    job = spec()
    view = savepoint("manual")  # backoffLimit 0: the first refusal fails it
    decided = decide(
        ctx(job, deployed_status(job)), Observed(pod=pod(job), coordinator=coordinator(), savepoints=[view])
    )
    (trigger,) = [a for a in decided.actions if isinstance(a, TriggerSavepoint)]
    plan = Plan(actions=[trigger, DeleteSavepoint("old", "too many")])
    kube = _Recording()
    # The pod lost its IP between observing and acting (rescheduled): the coordinator cannot be asked.
    executed = _execute(plan, Observed(pod=pod(job, ip=None)), kube)
    refused, deleted = executed.results
    assert isinstance(refused, Refused) and isinstance(deleted, Done)
    assert (refused.status.state, refused.status.failures) == ("Failed", 1)
    assert refused.status.error == "the coordinator pod has no IP"
    written = kube.writes[0]
    assert written[:2] == ("patch_status", "manual")
    assert (written[2]["state"], written[2]["failures"], written[2]["error"]) == (
        "Failed",
        1,
        "the coordinator pod has no IP",
    )
    assert kube.writes[1] == ("delete_custom", "old", None), "a refused trigger does not stop the rest"
    assert [e.reason for e in action_events(executed)] == ["SavepointFailed", "Failed", "SavepointDeleted"]
    assert plan.events == [], "acting reports what it did; the plan it was given stays as decided"
