"""A coordinator that exited without a job result: restart it, slowly, or give up when it cannot work."""

from __future__ import annotations

from sluice_operator import manifests as m
from sluice_operator.models import LifecycleState

from ..common.context import JobContext
from ..common.observed import Observed
from ..common.plan import DeletePods, Event, Plan

USAGE_ERROR = 2  # `sluice run` exit code for a bad pipeline file or argument (docs/reference/cli.md)
RESTART_DELAY_MS = 10_000


def crashed(
    ctx: JobContext, obs: Observed, plan: Plan, at_rest: LifecycleState | None
) -> tuple[LifecycleState, str | None]:
    """Lifecycle and error for an exited coordinator pod of which storage holds no job result.

    A usage error will not go away by itself: the pod stays (its log says what is wrong) and the job is
    Failed until the spec changes. Anything else (killed, out of memory, node lost) is restarted from
    the latest checkpoint, at most once per RESTART_DELAY_MS after the crash so a crash loop stays slow.
    """
    pod = obs.pod
    assert pod is not None
    why = f"coordinator pod {pod.name} ended ({pod.reason or pod.phase}) without a job result"
    changed = pod.spec_hash != m.spec_hash(ctx.spec)
    if at_rest is not None or changed:
        plan.actions.append(DeletePods((pod.name,), why))
        plan.soon(1.0)
        return (at_rest or LifecycleState.UPGRADING), None
    if pod.exit_code == USAGE_ERROR:
        return LifecycleState.FAILED, (
            f"{why}: `sluice run` rejected its pipeline or arguments; `kubectl logs {pod.name}` says why. "
            "Fix the spec (pipeline, args, sparkConf) to run it again"
        )
    waited = ctx.now_ms - (pod.finished_ms or ctx.now_ms)
    if ctx.status.lifecycle_state is not LifecycleState.DEPLOYING or waited == 0:
        plan.events.append(Event("Warning", "CoordinatorLost", why))
    if waited < RESTART_DELAY_MS and pod.finished_ms is not None:
        plan.soon((RESTART_DELAY_MS - waited) / 1000)
        return LifecycleState.DEPLOYING, f"{why}; restarting from the latest checkpoint soon"
    plan.actions.append(DeletePods((pod.name,), why))
    plan.soon(1.0)
    return LifecycleState.DEPLOYING, f"{why}; restarting from the latest checkpoint"
