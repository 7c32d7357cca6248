"""One idempotent reconcile of a StreamJob: observe -> validate -> decide -> act -> patch status."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from sluice_operator import manifests as m
from sluice_operator.kube import Obj
from sluice_operator.models import (
    ConditionType,
    OperatorConfig,
    StreamJobSpec,
    StreamJobStatus,
)
from sluice_operator.models import constants as c

from .auth import JobSecretError, ensure_job_secret
from .conditions import set_condition
from .context import JobContext
from .decide import decide
from .execute import execute
from .monitoring import ensure_pod_monitor, monitor_condition
from .observe import Deps, observe_job
from .old_runs import delete_expired_runs
from .plan import DeletePods, Event, StartRun
from .storage import Storage, storage_options
from .validate import InvalidSpecError, refuse_escalations, require_storage, streamjob_spec

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    """What the handler layer reports: events (on the job or a Savepoint), next visit, metrics labels."""

    events: list[Event] = field(default_factory=list)
    requeue_s: float | None = None
    lifecycle: str | None = None
    uid: str | None = None  # of the StreamJob, for its events


def owner_of(job: Obj) -> m.Owner:
    meta = job["metadata"]
    return m.Owner(name=meta["name"], namespace=meta["namespace"], uid=meta["uid"])


def read_status(job: Obj) -> StreamJobStatus:
    try:
        return StreamJobStatus.model_validate(job.get("status") or {})
    except ValueError:
        return StreamJobStatus()


async def job_storage(
    deps: Deps, config: OperatorConfig, namespace: str, spec: StreamJobSpec | None, uri: str
) -> Storage:
    secret = (spec.storage_secret if spec is not None else None) or config.storage_secret
    data = await deps.kube.secret_data(namespace, secret) if secret else None
    return Storage(storage_options(uri, data or {}))


def status_delta(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A merge patch turning `old` into `new` (fields gone from `new` become null), or {} if equal.

    A merge patch merges nested objects key by key, so the same applies inside them: a new run's `job`
    must not keep the `endTime` of the run before.
    """
    delta: dict[str, Any] = {}
    for key, value in new.items():
        before = old.get(key)
        if before == value:
            continue
        if isinstance(before, dict) and isinstance(value, dict):
            delta[key] = status_delta(before, value)
        else:
            delta[key] = value
    delta.update({k: None for k in old if k not in new})
    return delta


async def reconcile_job(deps: Deps, config: OperatorConfig, namespace: str, name: str) -> Outcome:
    job = await deps.kube.get_custom(c.STREAMJOB_PLURAL, namespace, name)
    if job is None or job["metadata"].get("deletionTimestamp"):
        return Outcome()
    owner = owner_of(job)
    generation = int(job["metadata"].get("generation") or 0)
    status = read_status(job)
    old_status = dict(job.get("status") or {})
    now_ms = int(time.time() * 1000)
    try:
        spec = streamjob_spec(job.get("spec"))
        refuse_escalations(spec, config.allow_privileged_pods)
        require_storage(spec, config)
    except InvalidSpecError as problem:
        return await _degraded(
            deps,
            owner,
            old=old_status,
            status=status,
            message=str(problem),
            generation=generation,
            now_ms=now_ms,
            reason=problem.reason,
        )
    try:
        # Before anything else: a coordinator is only started, and only called, with the job's Secret.
        token = await ensure_job_secret(deps.kube, owner)
    except JobSecretError as problem:
        return await _degraded(
            deps,
            owner,
            old=old_status,
            status=status,
            message=str(problem),
            generation=generation,
            now_ms=now_ms,
            reason="SecretConflict",
        )
    checkpoint_dir = m.checkpoint_dir(spec, owner, config)
    storage = await job_storage(deps, config, namespace, spec, checkpoint_dir)
    obs = await observe_job(
        deps,
        storage=storage,
        owner=owner,
        spec=spec,
        status=status,
        checkpoint_dir=checkpoint_dir,
        rest_token=token,
    )
    if obs.storage_error is not None and (obs.pod is None or obs.pod.exited):
        # Deciding without knowing how the last run ended could restart a finished job: wait instead.
        return await _degraded(
            deps,
            owner,
            old=old_status,
            status=status,
            message=obs.storage_error,
            generation=generation,
            now_ms=now_ms,
            reason="StorageUnavailable",
        )
    ctx = JobContext(
        owner=owner,
        generation=generation,
        spec=spec,
        status=status,
        config=config,
        now_ms=now_ms,
        new_job_id=uuid.uuid4().hex,
    )
    plan = decide(ctx, obs)
    outcome = Outcome(
        events=plan.events,
        requeue_s=plan.requeue_s,
        lifecycle=plan.status.get("lifecycleState"),
        uid=owner.uid,
    )
    monitor = await ensure_pod_monitor(deps.kube, owner, config.pod_monitor) if config.pod_monitor else None
    plan.events.extend(monitor_condition(plan.status, monitor, generation=generation, now_ms=now_ms))
    if plan.status.get("error") and plan.status.get("error") != old_status.get("error"):
        plan.events.append(Event("Warning", "Error", str(plan.status["error"])))
    # The status goes first: it records the run about to be started (job id, spec) before the pod exists.
    delta = status_delta(old_status, plan.status)
    if delta:
        await deps.kube.patch_status(c.STREAMJOB_PLURAL, namespace, name, delta)
    await execute(deps, obs, plan, owner)
    if not any(isinstance(action, StartRun | DeletePods) for action in plan.actions):
        plan.events.extend(await delete_expired_runs(deps.kube, storage, ctx, obs, checkpoint_dir))
    return outcome


async def _degraded(
    deps: Deps,
    owner: m.Owner,
    *,
    old: dict[str, Any],
    status: StreamJobStatus,
    message: str,
    generation: int,
    now_ms: int,
    reason: str,
) -> Outcome:
    new = dict(old)
    new["error"] = message
    new["observedGeneration"] = generation
    new.setdefault("lifecycleState", status.lifecycle_state.value)
    new["conditions"] = set_condition(
        list(old.get("conditions") or []),
        ConditionType.DEGRADED,
        True,
        reason,
        message,
        generation=generation,
        now_ms=now_ms,
    )
    delta = status_delta(old, new)
    events = [Event("Warning", reason, message)] if old.get("error") != message else []
    if delta:
        await deps.kube.patch_status(c.STREAMJOB_PLURAL, owner.namespace, owner.name, delta)
    return Outcome(
        events=events,
        requeue_s=10.0 if reason != "InvalidSpec" else None,
        lifecycle=new["lifecycleState"],
        uid=owner.uid,
    )


__all__ = ["Outcome", "reconcile_job"]
