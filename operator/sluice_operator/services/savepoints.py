"""Decisions about a job's Savepoint objects: trigger, follow, finish, retry, clean up, take periodically."""

from __future__ import annotations

from dataclasses import dataclass

from sluice_operator import manifests as m
from sluice_operator.models import (
    SavepointKind,
    SavepointState,
    SavepointStatus,
    StopMode,
    duration_ms,
)
from sluice_operator.models import constants as c

from ._time import millis, rfc3339
from .context import JobContext
from .observed import Observed, SavepointView
from .plan import (
    CreateSavepoint,
    DeleteSavepoint,
    Event,
    PatchSavepoint,
    Plan,
    SetDesiredState,
    TriggerSavepoint,
)

LABEL_GENERATION = f"{c.GROUP}/job-generation"
_REST_STOP: dict[StopMode, str | bool] = {
    StopMode.NONE: False,
    StopMode.SUSPEND: "suspend",
    StopMode.TERMINATE: "terminate",
}
_DESIRED = {StopMode.SUSPEND: "suspended", StopMode.TERMINATE: "finished"}


@dataclass
class SavepointOutlook:
    """What the job decision needs to know after this round of savepoint decisions."""

    active_stop: SavepointView | None = None
    failed_stop: SavepointView | None = None  # a stop for the current generation that failed for good
    # A stop that completed on the running job: the job is ending, nothing more to ask of it.
    completed_stop: SavepointView | None = None


def _with(view: SavepointView, **changes: object) -> SavepointStatus:
    return view.status.model_copy(update=changes)


def _finish(plan: Plan, view: SavepointView, status: SavepointStatus) -> None:
    plan.actions.append(PatchSavepoint(view.name, status))
    if status.state is SavepointState.COMPLETED:
        plan.events.append(
            Event("Normal", "SavepointCompleted", f"savepoint {view.name} completed at {status.path}")
        )
        plan.events.append(
            Event("Normal", "Completed", f"savepoint at {status.path}", savepoint=view.name, uid=view.uid)
        )
    elif status.state in (SavepointState.FAILED, SavepointState.ABANDONED):
        text = f"savepoint {view.name} {status.state.value.lower()}: {status.error}"
        plan.events.append(Event("Warning", f"Savepoint{status.state.value}", text))
        plan.events.append(
            Event("Warning", status.state.value, status.error or "", savepoint=view.name, uid=view.uid)
        )


def plan_savepoints(ctx: JobContext, obs: Observed, plan: Plan) -> SavepointOutlook:
    outlook = SavepointOutlook()
    coordinator = obs.coordinator
    live_job_id = coordinator.job_id if coordinator is not None else None
    running = coordinator is not None and coordinator.state == "RUNNING"
    in_flight = any(v.status.trigger_id for v in obs.savepoints if not v.status.state.terminal)
    triggered_now = False
    for view in sorted(obs.savepoints, key=lambda v: v.created):
        status = view.status
        if status.state.terminal:
            if (
                view.spec is not None
                and view.spec.stop is not StopMode.NONE
                and status.state is SavepointState.COMPLETED
                and live_job_id is not None
                and status.job_id == live_job_id
            ):
                outlook.completed_stop = view
            if (
                view.spec is not None
                and view.spec.stop is not StopMode.NONE
                and view.labels.get(LABEL_GENERATION) == str(ctx.generation)
                and status.state is not SavepointState.COMPLETED
            ):
                outlook.failed_stop = view
            continue
        if view.spec is None:
            _finish(plan, view, _with(view, state=SavepointState.FAILED, error=view.spec_error))
            continue
        stop = view.spec.stop
        refusal = _target_refusal(ctx, view) if status.trigger_id is None else None
        if refusal is not None:  # refused before anything else: a stop it asks for does not happen either
            _finish(plan, view, _with(view, state=SavepointState.FAILED, error=refusal))
            continue
        if status.trigger_id is not None:
            new = _follow(ctx, obs, view)
            if new is None:
                plan.soon(1.0)
            elif new.state.terminal:
                _finish(plan, view, new)
                if stop is not StopMode.NONE and new.state is not SavepointState.COMPLETED:
                    outlook.failed_stop = view
                elif stop is not StopMode.NONE:
                    outlook.completed_stop = view
                continue
            else:
                plan.actions.append(PatchSavepoint(view.name, new))
                in_flight = new.trigger_id is not None
        if stop is not StopMode.NONE:
            outlook.active_stop = outlook.active_stop or view
            wanted = _DESIRED[stop]
            if ctx.spec.state.value != wanted and not view.owned:
                plan.actions.append(SetDesiredState(wanted, view.name))
                plan.events.append(
                    Event(
                        "Normal",
                        "StopRequested",
                        f"Savepoint {view.name} asks to stop with {stop.value}: spec.state={wanted}",
                    )
                )
        if view.status.trigger_id is not None or in_flight or triggered_now or view.deleting:
            continue  # a Savepoint deleted before it was triggered is not taken at all
        if view.spec.dispose_on_delete and not view.finalized:
            # Its files may only be written once the finalizer that removes them is on the object: a
            # Savepoint deleted right after creation would otherwise leave them behind.
            plan.soon(1.0)
            continue
        if running and live_job_id is not None:
            target = view.spec.target_directory or m.savepoint_dir(ctx.spec, ctx.owner, ctx.config)
            plan.actions.append(TriggerSavepoint(view.name, _REST_STOP[stop], target, live_job_id))
            plan.events.append(
                Event(
                    "Normal",
                    "SavepointTriggered",
                    f"savepoint {view.name} (stop: {stop.value}) triggered on job {live_job_id}",
                )
            )
            triggered_now = True
            plan.soon(1.0)
        elif obs.pod is None or obs.pod.exited:
            error = (
                f"StreamJob {ctx.owner.name!r} is not running (lifecycle "
                f"{ctx.status.lifecycle_state.value}); a savepoint needs a running job"
            )
            _finish(plan, view, _with(view, state=SavepointState.FAILED, error=error))
            if stop is not StopMode.NONE:
                outlook.active_stop = None if outlook.active_stop is view else outlook.active_stop
        else:
            plan.soon(2.0)  # the coordinator is starting; trigger once the job runs
    return outlook


def _target_refusal(ctx: JobContext, view: SavepointView) -> str | None:
    assert view.spec is not None
    if view.spec.target_directory is None:
        return None  # the job's own savepoint directory
    allowed = m.allowed_savepoint_prefixes(ctx.spec, ctx.owner, ctx.config)
    return m.target_refusal(view.spec.target_directory, allowed)


def _follow(ctx: JobContext, obs: Observed, view: SavepointView) -> SavepointStatus | None:
    """The next status of a triggered savepoint, or None while it is still in progress."""
    status = view.status
    assert view.spec is not None
    poll = obs.savepoint_polls.get(status.trigger_id or "")
    if poll is not None:
        answer = str(poll.get("status"))
        if answer == "COMPLETED":
            return _with(
                view,
                state=SavepointState.COMPLETED,
                path=poll.get("path"),
                checkpoint_id=poll.get("checkpointId"),
                completion_time=rfc3339(ctx.now_ms),
                error=None,
            )
        if answer == "IN_PROGRESS":
            return None
        failures = status.failures + 1
        error = str(poll.get("error") or f"the coordinator answered {answer}")
        if failures > view.spec.backoff_limit:
            return _with(view, state=SavepointState.FAILED, failures=failures, error=error, trigger_id=None)
        return _with(view, state=SavepointState.PENDING, failures=failures, error=error, trigger_id=None)
    result = obs.result
    if result is not None and result.job_id == status.job_id:
        if view.spec.stop is not StopMode.NONE and result.stop_savepoint and result.state == "FINISHED":
            return _with(
                view,
                state=SavepointState.COMPLETED,
                path=result.stop_savepoint,
                completion_time=rfc3339(result.timestamp or ctx.now_ms),
                error=None,
            )
        return _with(
            view,
            state=SavepointState.ABANDONED,
            error=f"job {status.job_id} ended {result.state} before the savepoint completed",
        )
    pod = obs.pod
    if pod is not None and pod.job_id == status.job_id and not pod.exited:
        return None  # coordinator temporarily unreachable; keep following
    return _with(
        view,
        state=SavepointState.ABANDONED,
        error=f"the coordinator of job {status.job_id} is gone; the savepoint cannot complete",
    )


def ensure_stop_savepoint(ctx: JobContext, plan: Plan, kind: SavepointKind) -> None:
    """Create the operator's stop (or upgrade) Savepoint for the current generation."""
    stop = StopMode.TERMINATE if kind is SavepointKind.TERMINATE else StopMode.SUSPEND
    manifest = m.operator_savepoint(
        ctx.owner,
        kind=kind,
        stop=stop,
        stamp=ctx.generation,
        dispose_on_delete=ctx.spec.savepoints.dispose_on_delete,
    )
    manifest["metadata"]["labels"][LABEL_GENERATION] = str(ctx.generation)
    plan.actions.append(CreateSavepoint(manifest))
    plan.events.append(
        Event(
            "Normal",
            "StopWithSavepoint",
            f"stopping with a savepoint ({stop.value}): Savepoint {manifest['metadata']['name']}",
        )
    )
    plan.soon(1.0)


def periodic_and_cleanup(
    ctx: JobContext, obs: Observed, plan: Plan, *, job_running: bool, start_ms: int | None
) -> None:
    """Take the next periodic savepoint when it is due, and trim the history of operator-made ones."""
    if job_running:
        _periodic(ctx, obs, plan, start_ms)
    _trim_history(ctx, obs, plan)


def _periodic(ctx: JobContext, obs: Observed, plan: Plan, start_ms: int | None) -> None:
    policy = ctx.spec.savepoints
    if not policy.periodic_interval or any(not v.status.state.terminal for v in obs.savepoints):
        return  # one savepoint at a time: a periodic one waits for any other in flight
    periodic = [millis(v.created) or 0 for v in obs.savepoints if v.labels.get(c.LABEL_TRIGGER) == "periodic"]
    since = max([*periodic, start_ms or ctx.now_ms])
    if ctx.now_ms - since < duration_ms(policy.periodic_interval):
        return
    manifest = m.operator_savepoint(
        ctx.owner,
        kind=SavepointKind.PERIODIC,
        stop=StopMode.NONE,
        stamp=ctx.now_ms // 1000,
        dispose_on_delete=policy.dispose_on_delete,
    )
    plan.actions.append(CreateSavepoint(manifest))


def _ended_at(view: SavepointView) -> str:
    return view.status.completion_time or view.created


def _trim_history(ctx: JobContext, obs: Observed, plan: Plan) -> None:
    """Delete operator-made savepoints beyond historyMaxCount or older than historyMaxAge.

    The newest completed savepoint of the job stays whatever its age: it is where the job would resume
    from. A user's Savepoints are the user's to delete and are never touched, nor counted. Periodic
    savepoints that failed are trimmed by the same rules, counted on their own, so that a job whose
    savepoints keep failing does not pile up one object per interval.
    """
    completed = sorted(
        (v for v in obs.savepoints if v.status.state is SavepointState.COMPLETED), key=_ended_at, reverse=True
    )
    latest = completed[0].name if completed else None
    failed_periodic = sorted(
        (
            v
            for v in obs.savepoints
            if v.status.state.terminal
            and v.status.state is not SavepointState.COMPLETED
            and v.labels.get(c.LABEL_TRIGGER) == SavepointKind.PERIODIC.value
        ),
        key=_ended_at,
        reverse=True,
    )
    for views in (completed, failed_periodic):
        kept = 0
        for view in views:
            if not view.owned or view.deleting:
                continue  # a user's, or already on its way out (its finalizer is disposing of files)
            reason = _too_many_or_too_old(ctx, view, kept) if view.name != latest else None
            if reason is None:
                kept += 1
            else:
                plan.actions.append(DeleteSavepoint(view.name, reason))


def _too_many_or_too_old(ctx: JobContext, view: SavepointView, kept: int) -> str | None:
    policy = ctx.spec.savepoints
    if kept >= policy.history_max_count:
        return f"more than {policy.history_max_count} savepoints"
    if policy.history_max_age is not None:
        age = ctx.now_ms - (millis(_ended_at(view)) or ctx.now_ms)
        if age > duration_ms(policy.history_max_age):
            return f"older than {policy.history_max_age}"
    return None
