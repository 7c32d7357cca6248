"""The StreamJob decision: from what was observed, what the job's status is and what to do next.

Pure and level-based: every call looks at the whole observed situation (coordinator pod, REST API, job
result and checkpoints in storage, Savepoint objects) and derives the next step from it; nothing is
carried from one reconcile to the next except what Kubernetes and the storage hold. `status` is read
only as the record of the last run (its job id and spec) once the coordinator pod is gone.
"""

from __future__ import annotations

from sluice_contract.results import JobResult
from sluice_operator import manifests as m
from sluice_operator.models import (
    DegradedReason,
    JobState,
    JobStatus,
    LifecycleState,
    OperatorConfig,
    PodPhase,
    RunState,
    SavepointKind,
    StreamJobSpec,
    UpgradeMode,
)

from ..common.context import JobContext
from ..common.observed import Observed
from ..common.plan import (
    Action,
    DeletePods,
    DeleteSavepoint,
    EnsureJobSecret,
    EnsurePodMonitor,
    EnsureStateKey,
    Event,
    Plan,
    StartRun,
)
from ._crash import crashed
from ._status import job_from_coordinator, job_from_result, last_checkpoint, savepoint_summary
from .job_conditions import job_conditions
from .old_runs import plan_expired_runs, remember_run
from .savepoint_housekeeping import periodic_and_cleanup
from .savepoints import SavepointOutlook, ensure_stop_savepoint, plan_savepoints

_BUSY = (LifecycleState.RUNNING, LifecycleState.STOPPING, LifecycleState.UPGRADING)
_AT_REST = {JobState.SUSPENDED: LifecycleState.SUSPENDED, JobState.FINISHED: LifecycleState.FINISHED}
_SETTLING = (
    LifecycleState.UPGRADING,
    LifecycleState.STOPPING,
    LifecycleState.SUSPENDED,
    LifecycleState.FINISHED,
    LifecycleState.FAILED,
)


def deployed_hash(ctx: JobContext, obs: Observed) -> str | None:
    if obs.pod is not None and obs.pod.spec_hash:
        return obs.pod.spec_hash
    if ctx.status.last_reconciled_spec:
        try:
            return m.spec_hash(StreamJobSpec.model_validate_json(ctx.status.last_reconciled_spec))
        except ValueError:
            return None
    return None


def prerequisites(config: OperatorConfig) -> Plan:
    """What must be in place before a job is observed: its Secret first (a coordinator is only started,
    and only called, with its token), the namespace's state key, and its PodMonitor when the operator
    keeps one. Each is idempotent, so every reconcile asks for all of them."""
    actions: list[Action] = [EnsureJobSecret(), EnsureStateKey()]
    if config.pod_monitor is not None:
        actions.append(EnsurePodMonitor(config.pod_monitor))
    return Plan(actions=actions)


def cannot_decide(obs: Observed) -> str | None:
    """Why nothing can be decided from `obs` yet (the job is then Degraded, StorageUnavailable), or None.

    Storage that cannot be read while no coordinator runs hides how the last run ended: deciding
    without it could restart a finished job, so the reconcile waits instead.
    """
    if obs.storage_error is not None and (obs.pod is None or obs.pod.exited):
        return obs.storage_error
    return None


def decide(ctx: JobContext, obs: Observed) -> Plan:
    plan = Plan(status=ctx.status.model_copy(deep=True, update={"error": None}))
    outlook = plan_savepoints(ctx, obs, plan)
    lifecycle, error = _lifecycle(ctx, obs, plan, outlook)
    if lifecycle in (LifecycleState.SUSPENDED, LifecycleState.FINISHED):
        # History limits hold at rest too (a running job trims while it takes periodic savepoints).
        periodic_and_cleanup(ctx, obs, plan, job_running=False, start_ms=None)
    previous = ctx.status.lifecycle_state
    if lifecycle is not previous:
        plan.events.append(
            Event("Normal", lifecycle.value, f"lifecycle {previous.value} -> {lifecycle.value}")
        )
    status = plan.status
    status.lifecycle_state = lifecycle
    status.observed_generation = ctx.generation
    status.error = error or None
    if lifecycle in (LifecycleState.RUNNING, LifecycleState.FINISHED) and error is None:
        status.last_stable_spec = status.last_reconciled_spec
    running_pod = obs.pod is not None and obs.pod.phase == PodPhase.RUNNING and not obs.pod.exited
    status.dashboard_url = m.dashboard_url(ctx.owner) if running_pod else None
    if obs.coordinator is None and status.job is not None:
        # Measured by a coordinator that is not answering: stale.
        status.job.records_read_per_second = None
        status.job.records_written_per_second = None
    # Not the Savepoints on their way out (this plan deletes them, or their files are being disposed
    # of): the history lists restore points, and theirs may be gone by the time someone reads it.
    leaving = {a.name for a in plan.actions if isinstance(a, DeleteSavepoint)}
    kept = [v for v in obs.savepoints if not v.deleting and v.name not in leaving]
    status.last_savepoint, status.savepoint_history = savepoint_summary(kept, status.last_savepoint)
    status.conditions = job_conditions(
        status.conditions,
        desired=ctx.spec.state,
        lifecycle=lifecycle,
        error=error,
        degraded_reason=DegradedReason.JOB_FAILED
        if lifecycle is LifecycleState.FAILED
        else DegradedReason.ERROR,
        generation=ctx.generation,
        now_ms=ctx.now_ms,
    )
    plan_expired_runs(ctx, obs, plan)
    return plan


def _lifecycle(
    ctx: JobContext, obs: Observed, plan: Plan, outlook: SavepointOutlook
) -> tuple[LifecycleState, str | None]:
    pod = obs.pod
    if pod is not None and pod.terminating:
        plan.soon(1.0)
        # An upgrade or stop under way, or a run that has ended (its pod is deleted once the job is
        # Finished, Suspended or Failed): the pod going away changes neither.
        settled = ctx.status.lifecycle_state in _SETTLING
        return (ctx.status.lifecycle_state if settled else LifecycleState.DEPLOYING), None
    if obs.stray_pods and (pod is None or pod.exited):
        plan.actions.append(DeletePods(tuple(obs.stray_pods), "left over from an earlier run"))
        plan.soon(1.0)
    if obs.result is not None:
        return _ended(ctx, obs, plan)
    if pod is not None and pod.exited:
        at_rest = None if ctx.spec.state is JobState.RUNNING else _AT_REST[ctx.spec.state]
        return crashed(ctx, obs, plan, at_rest)
    if pod is not None:
        return _active(ctx, obs, plan, outlook)
    return _idle(ctx, obs, plan)


def _start(ctx: JobContext, obs: Observed, plan: Plan, restore: str | None) -> None:
    if obs.stray_pods:
        return  # the leftovers go first: executor pod names would collide
    run = m.Run(
        owner=ctx.owner, spec=ctx.spec, config=ctx.config, job_id=ctx.new_job_id, restore_from=restore
    )
    plan.actions.append(StartRun(run))
    plan.status.job = JobStatus(id=run.job_id, state=RunState.CREATED.value, restored_from=restore or None)
    plan.status.last_reconciled_spec = m.deployed_spec_json(ctx.spec)
    plan.status.checkpoint_runs = remember_run(ctx.status.checkpoint_runs, run.job_id)
    plan.events.append(
        Event(
            "Normal",
            "Deploying",
            f"starting job {run.job_id}" + (f" from {restore}" if restore else " with empty state"),
        )
    )
    plan.soon(2.0)


def _restore_point(
    ctx: JobContext, obs: Observed, *, changed: bool, stop_savepoint: str | None
) -> str | None:
    """Where a new run starts: the rules of the upgrade modes (docs/operator.md)."""
    if ctx.status.job is None or ctx.status.job.id is None:
        return ctx.spec.initial_savepoint
    if stop_savepoint is not None:
        # The previous run stopped with a savepoint: an upgrade savepoint (savepoint mode), or a stop
        # the user asked for, which a suspended job resumes from whatever its spec has become.
        return stop_savepoint
    if changed and ctx.spec.upgrade_mode is UpgradeMode.STATELESS:
        return None
    if obs.latest_checkpoint is not None:
        return obs.latest_checkpoint.path
    # A run without a checkpoint of its own goes on from where it started. An older run's checkpoint
    # would replay (and commit again) what this run's restore point had already committed, or bring
    # back the state a stateless upgrade dropped.
    return ctx.status.job.restored_from


def _ended(ctx: JobContext, obs: Observed, plan: Plan) -> tuple[LifecycleState, str | None]:
    result = obs.result
    assert result is not None
    plan.status.job = job_from_result(result, plan.status.job)
    checkpoint = last_checkpoint(obs.last_result_snapshot or obs.latest_checkpoint)
    if checkpoint is not None:
        plan.status.last_checkpoint = checkpoint
    changed = deployed_hash(ctx, obs) != m.spec_hash(ctx.spec)
    if obs.pod is not None:
        # The coordinator's pods go away first; the next reconcile starts a new run if one is wanted.
        plan.actions.append(DeletePods((obs.pod.name,), f"job {result.job_id} ended {result.state}"))
        plan.soon(1.0)
        return _ended_pods_remain(ctx.spec.state, result, changed=changed), None
    return _ended_pods_gone(ctx, obs, plan, result, changed=changed)


def _ended_pods_remain(desired: JobState, result: JobResult, *, changed: bool) -> LifecycleState:
    if desired is not JobState.RUNNING:
        return _AT_REST[desired]
    if changed:
        return LifecycleState.UPGRADING
    if result.stop_savepoint:
        return LifecycleState.DEPLOYING
    return LifecycleState.FINISHED if result.state == RunState.FINISHED else LifecycleState.FAILED


def _ended_pods_gone(
    ctx: JobContext, obs: Observed, plan: Plan, result: JobResult, *, changed: bool
) -> tuple[LifecycleState, str | None]:
    """The run ended and its pods are gone: start the next run if the spec wants one."""
    desired = ctx.spec.state
    finished = result.state == RunState.FINISHED
    # Its stop savepoint, never its last one: a bounded job that took a plain (periodic) savepoint and
    # then ended on its own has one, and a run started from it would write everything after it again.
    if finished and result.stop_savepoint:
        if desired is JobState.RUNNING:
            _start(
                ctx,
                obs,
                plan,
                _restore_point(ctx, obs, changed=changed, stop_savepoint=result.stop_savepoint),
            )
            return (LifecycleState.UPGRADING if changed else LifecycleState.DEPLOYING), None
        return _AT_REST[desired], None
    if finished:
        if desired is JobState.RUNNING and changed:
            _start(ctx, obs, plan, _restore_point(ctx, obs, changed=True, stop_savepoint=None))
            return LifecycleState.UPGRADING, None
        return LifecycleState.FINISHED, None
    if desired is JobState.RUNNING and changed:
        _start(ctx, obs, plan, _restore_point(ctx, obs, changed=True, stop_savepoint=None))
        return LifecycleState.UPGRADING, None
    if desired is JobState.SUSPENDED:
        return LifecycleState.SUSPENDED, None
    reason = f"job {result.job_id} ended {result.state}: {result.error or 'no error reported'}"
    return LifecycleState.FAILED, reason + "; change the spec (or restartNonce) to run it again"


def _idle(ctx: JobContext, obs: Observed, plan: Plan) -> tuple[LifecycleState, str | None]:
    if ctx.spec.state is not JobState.RUNNING:
        return _AT_REST[ctx.spec.state], None
    previous = deployed_hash(ctx, obs)
    changed = previous is not None and previous != m.spec_hash(ctx.spec)
    _start(ctx, obs, plan, _restore_point(ctx, obs, changed=changed, stop_savepoint=None))
    return (LifecycleState.UPGRADING if changed else LifecycleState.DEPLOYING), None


def _active(
    ctx: JobContext, obs: Observed, plan: Plan, outlook: SavepointOutlook
) -> tuple[LifecycleState, str | None]:
    pod = obs.pod
    assert pod is not None
    coordinator = obs.coordinator
    job_state = coordinator.state if coordinator is not None else None
    if coordinator is not None:
        plan.status.job = job_from_coordinator(coordinator, pod, plan.status.job)
    checkpoint = last_checkpoint(obs.latest_checkpoint, coordinator)
    if checkpoint is not None:
        plan.status.last_checkpoint = checkpoint
    if job_state in (RunState.FINISHED, RunState.FAILED, RunState.CANCELED):
        # The job is over but its result is not in storage yet: wait for it rather than guess.
        plan.soon(1.0)
        previous = ctx.status.lifecycle_state
        return (previous if previous in _BUSY else LifecycleState.RUNNING), None
    running = job_state in (RunState.RUNNING, RunState.RESTARTING)
    desired = ctx.spec.state
    changed = pod.spec_hash != m.spec_hash(ctx.spec)
    if desired is not JobState.RUNNING:
        return _stopping(ctx, obs, plan, outlook, running=job_state == RunState.RUNNING)
    if changed:
        return _upgrade(ctx, obs, plan, outlook, running=job_state == RunState.RUNNING)
    if outlook.active_stop is not None:
        return LifecycleState.STOPPING, None
    if not running:
        plan.soon(2.0)
        return LifecycleState.DEPLOYING, None
    start = coordinator.job.start_time if coordinator is not None else None
    periodic_and_cleanup(
        ctx,
        obs,
        plan,
        job_running=job_state == RunState.RUNNING,
        start_ms=start,
    )
    if job_state == RunState.RESTARTING:
        return (
            LifecycleState.RUNNING,
            f"job is restarting after a failure: {coordinator.job.error}"
            if coordinator is not None
            else None,
        )
    return LifecycleState.RUNNING, None


def _stopping(
    ctx: JobContext, obs: Observed, plan: Plan, outlook: SavepointOutlook, *, running: bool
) -> tuple[LifecycleState, str | None]:
    pod = obs.pod
    assert pod is not None
    if outlook.active_stop is not None or outlook.completed_stop is not None:
        return LifecycleState.STOPPING, None
    if outlook.failed_stop is not None:
        view = outlook.failed_stop
        return LifecycleState.RUNNING, (
            f"stop with savepoint failed ({view.name}: {view.status.error}); the job keeps running. "
            "Set spec.state to running, or create a new Savepoint with stop to try again"
        )
    if running:
        kind = SavepointKind.SUSPEND if ctx.spec.state is JobState.SUSPENDED else SavepointKind.TERMINATE
        ensure_stop_savepoint(ctx, plan, kind)
        return LifecycleState.STOPPING, None
    if pod.phase == PodPhase.PENDING or (obs.coordinator is None and pod.phase != PodPhase.RUNNING):
        plan.actions.append(DeletePods((pod.name,), "the job never started; nothing to save"))
        return _AT_REST[ctx.spec.state], None
    plan.soon(2.0)
    return LifecycleState.STOPPING, None


def _upgrade(
    ctx: JobContext, obs: Observed, plan: Plan, outlook: SavepointOutlook, *, running: bool
) -> tuple[LifecycleState, str | None]:
    pod = obs.pod
    assert pod is not None
    if ctx.spec.upgrade_mode is UpgradeMode.SAVEPOINT and running:
        if outlook.active_stop is not None or outlook.completed_stop is not None:
            return LifecycleState.UPGRADING, None
        if outlook.failed_stop is not None:
            view = outlook.failed_stop
            return LifecycleState.RUNNING, (
                f"upgrade savepoint failed ({view.name}: {view.status.error}); the job keeps running the "
                "previous spec. Fix the cause and change the spec again, or use upgradeMode last-state"
            )
        ensure_stop_savepoint(ctx, plan, SavepointKind.UPGRADE)
        return LifecycleState.UPGRADING, None
    stop = outlook.active_stop
    if (
        ctx.spec.upgrade_mode is UpgradeMode.SAVEPOINT
        and stop is not None
        and stop.status.trigger_id is not None
        and obs.coordinator is None
        and not pod.exited
    ):
        # The coordinator accepted the upgrade's stop and does not answer now (a REST timeout, its
        # Service briefly without endpoints): deleting its pod would cut the stop short and restart
        # from an older checkpoint. The stop ends the run, or fails, and decides the upgrade then.
        plan.soon(2.0)
        return LifecycleState.UPGRADING, None
    why = f"spec changed; upgrading with mode {ctx.spec.upgrade_mode.value}"
    if ctx.spec.upgrade_mode is UpgradeMode.SAVEPOINT:
        why += " (the job is not running, so from its latest checkpoint)"
    plan.actions.append(DeletePods((pod.name,), why))
    plan.events.append(Event("Normal", "Upgrading", why))
    plan.soon(1.0)
    return LifecycleState.UPGRADING, None
