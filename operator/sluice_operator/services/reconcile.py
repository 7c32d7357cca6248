"""One idempotent reconcile of a StreamJob: validate -> observe -> decide -> act (which records).

Every side effect of a reconcile is an action of a plan, carried out by `execute`, the one holder of the
recorder."""

from __future__ import annotations

import logging
import time
import uuid

from sluice_operator.models import DegradedReason, OperatorConfig
from sluice_operator.models import constants as c

from .act.auth import JobSecretError
from .act.execute import execute
from .act.record import record_degraded, record_status
from .clients.deps import Deps
from .common.objects import StreamJobObject
from .common.observed import Observed
from .common.outcome import Outcome
from .common.plan import Plan
from .decide.job import cannot_decide, decide, prerequisites
from .observe.gather import gather
from .observe.validate import InvalidSpecError, refuse_escalations, require_storage, streamjob_spec

log = logging.getLogger(__name__)


async def reconcile_job(deps: Deps, config: OperatorConfig, namespace: str, name: str) -> Outcome:
    obj = await deps.kube.get_custom(c.STREAMJOB_PLURAL, namespace, name)
    job = StreamJobObject.parse(obj) if obj is not None else None
    if job is None or job.meta.deleting:
        return Outcome()
    owner = job.owner
    now_ms = int(time.time() * 1000)
    degraded = _Degraded(deps, job, now_ms)
    try:
        spec = streamjob_spec(job.spec)
        refuse_escalations(spec, config.allow_privileged_pods)
        require_storage(spec, config)
    except InvalidSpecError as problem:
        return await degraded(problem.reason, str(problem))
    try:
        # A plan of its own, acted on before observing: the coordinator is only called with the token of
        # the job's Secret, and a new run only started once the Secret exists.
        ready = await execute(deps, Observed(), prerequisites(config), owner)
    except JobSecretError as problem:
        return await degraded(DegradedReason.SECRET_CONFLICT, str(problem))
    found = await gather(
        deps,
        config,
        job,
        spec,
        rest_token=ready.rest_token,
        state_key=ready.state_key,
        now_ms=now_ms,
        new_job_id=uuid.uuid4().hex,
    )
    ctx, obs = found.ctx, found.obs
    unknown = cannot_decide(obs)
    if unknown is not None:
        return await degraded(DegradedReason.STORAGE_UNAVAILABLE, unknown)
    plan = decide(ctx, obs)
    recorded = record_status(
        job.recorded, plan.status, ready.monitor, generation=ctx.generation, now_ms=now_ms
    )
    await execute(deps, obs, plan, owner, status=recorded.patch, said=recorded.events, storage=found.storage)
    return Outcome(
        requeue_s=plan.requeue_s,
        lifecycle=recorded.status.lifecycle_state.value,
    )


class _Degraded:
    """Records that the job cannot be decided on (yet): the status says why, the rest of it stays."""

    def __init__(self, deps: Deps, job: StreamJobObject, now_ms: int) -> None:
        self._deps, self._job, self._now_ms = deps, job, now_ms

    async def __call__(self, reason: DegradedReason, message: str) -> Outcome:
        job = self._job
        recorded = record_degraded(
            job.recorded, job.status, reason, message, generation=job.meta.generation, now_ms=self._now_ms
        )
        owner = job.owner
        # Nothing to act on but the record: an empty plan, executed like any other.
        await execute(self._deps, Observed(), Plan(), owner, status=recorded.patch, said=recorded.events)
        return Outcome(
            # A spec the user must fix changes (and wakes the job) when fixed; other causes pass.
            requeue_s=None if reason is DegradedReason.INVALID_SPEC else 10.0,
            lifecycle=recorded.status.lifecycle_state.value,
        )


__all__ = ["reconcile_job"]
