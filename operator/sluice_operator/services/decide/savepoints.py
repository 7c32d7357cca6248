"""Decisions about a job's Savepoint objects: trigger, follow, finish, retry, stop the job with one.

Every trigger carries a request id made from the Savepoint's uid and its attempt (`request_id`). The
coordinator answers a request id it accepted before with the same trigger, and stores the id of the
stop a job ended with in the job's result. So a trigger the coordinator accepted but whose record on
the Savepoint was lost (the status patch failed: the API server was down) is not lost: asked for
again, the same trigger comes back; and once the run has ended, its stored result says the stop was
ours and where its savepoint is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sluice_contract.results import JobResult
from sluice_operator import manifests as m
from sluice_operator.models import (
    JobState,
    RunState,
    SavepointKind,
    SavepointState,
    SavepointStatus,
    StopMode,
    TriggerState,
    TriggerStop,
)
from sluice_operator.models import constants as c

from ..common._time import rfc3339
from ..common.context import JobContext
from ..common.observed import Observed, SavepointView
from ..common.plan import (
    CreateSavepoint,
    Event,
    PatchSavepoint,
    Plan,
    SetDesiredState,
    TriggerSavepoint,
)
from ..common.savepoint_events import outcome_events

_REST_STOP: dict[StopMode, TriggerStop | None] = {
    StopMode.NONE: None,
    StopMode.SUSPEND: TriggerStop.SUSPEND,
    StopMode.TERMINATE: TriggerStop.TERMINATE,
}
_DESIRED = {StopMode.SUSPEND: JobState.SUSPENDED, StopMode.TERMINATE: JobState.FINISHED}


@dataclass
class SavepointOutlook:
    """What the job decision needs to know after this round of savepoint decisions."""

    active_stop: SavepointView | None = None
    failed_stop: SavepointView | None = None  # a stop for the current generation that failed for good
    # A stop that completed on the running job: the job is ending, nothing more to ask of it.
    completed_stop: SavepointView | None = None


def request_id(view: SavepointView) -> str | None:
    """The request id of the Savepoint's current attempt: its uid and the attempt's number.

    An attempt that failed is counted in `failures` before the next one, so a retry is a new request;
    the same attempt asked for again (its record was lost) is the same request, answered with the same
    trigger. None for a Savepoint without a uid (only a test builds one).
    """
    return f"{view.uid}.{view.status.failures}" if view.uid else None


def _with(view: SavepointView, **changes: object) -> SavepointStatus:
    return view.status.model_copy(update=changes)


def _finish(plan: Plan, view: SavepointView, status: SavepointStatus) -> None:
    plan.actions.append(PatchSavepoint(view.name, status))
    plan.events.extend(outcome_events(view.name, view.uid, status))


@dataclass
class _Round:
    """One pass over a job's Savepoints, oldest first: what the later ones must know of the earlier."""

    ctx: JobContext
    obs: Observed
    plan: Plan
    outlook: SavepointOutlook = field(default_factory=SavepointOutlook)
    # A savepoint is in flight on the coordinator, or was triggered in this round: one at a time.
    in_flight: bool = False
    triggered_now: bool = False

    @property
    def live_job_id(self) -> str | None:
        return self.obs.coordinator.job_id if self.obs.coordinator is not None else None

    @property
    def running(self) -> bool:
        return self.obs.coordinator is not None and self.obs.coordinator.state == RunState.RUNNING


def plan_savepoints(ctx: JobContext, obs: Observed, plan: Plan) -> SavepointOutlook:
    """Decide, for each of the job's Savepoints by its state, what happens to it in this reconcile."""
    round_ = _Round(ctx, obs, plan)
    round_.in_flight = any(v.status.trigger_id for v in obs.savepoints if not v.status.state.terminal)
    for view in sorted(obs.savepoints, key=lambda v: v.created):
        if view.status.state.terminal:
            _ended(round_, view)
        elif view.spec is None:
            _finish(plan, view, _with(view, state=SavepointState.FAILED, error=view.spec_error))
        elif view.status.trigger_id is not None:
            if _triggered(round_, view):
                _stop_request(round_, view)
        elif (refusal := _target_refusal(ctx, view)) is not None:
            # Refused before anything else: a stop it asks for does not happen either.
            _finish(plan, view, _with(view, state=SavepointState.FAILED, error=refusal))
        elif (stored := _stored_stop(round_.ctx, round_.obs.result, view)) is not None:
            _finish(plan, view, stored)
            round_.outlook.completed_stop = view
        else:
            _stop_request(round_, view)
            _not_triggered(round_, view)
    return round_.outlook


def _is_stop(view: SavepointView) -> bool:
    return view.spec is not None and view.spec.stop is not StopMode.NONE


def _ours(result: JobResult, view: SavepointView) -> bool:
    """Whether the stop the run ended with is the one this Savepoint asked for, as far as the result
    says: a result without a request id (stored by an older runtime, or a stop asked for without one)
    cannot tell, and is taken as before."""
    return result.stop_request_id is None or result.stop_request_id == request_id(view)


def _stored_stop(ctx: JobContext, result: JobResult | None, view: SavepointView) -> SavepointStatus | None:
    """A stop Savepoint with no trigger on record that the run ended with all the same, or None.

    Its trigger was accepted and its record lost; the run's stored result (authenticated: the storage
    client believes no other) names this Savepoint's request id, so the stop was this one and the
    savepoint is the result's. A result that names no request id is not enough here: with no trigger on
    record, nothing else says the stop was ours.
    """
    wanted = request_id(view)
    if result is None or wanted is None or not _is_stop(view) or result.stop_request_id != wanted:
        return None
    if result.state != RunState.FINISHED or not result.stop_savepoint:
        return None
    return _with(
        view,
        state=SavepointState.COMPLETED,
        job_id=result.job_id,
        path=result.stop_savepoint,
        completion_time=rfc3339(result.timestamp or ctx.now_ms),
        error=None,
    )


def _ended(round_: _Round, view: SavepointView) -> None:
    """A Savepoint that has ended tells the job whether its stop completed or failed for good."""
    status = view.status
    if not _is_stop(view):
        return
    completed = status.state is SavepointState.COMPLETED
    if completed and round_.live_job_id is not None and status.job_id == round_.live_job_id:
        round_.outlook.completed_stop = view
    if not completed and view.labels.get(c.LABEL_GENERATION) == str(round_.ctx.generation):
        round_.outlook.failed_stop = view


def _triggered(round_: _Round, view: SavepointView) -> bool:
    """Follow a triggered savepoint; False once it has ended (nothing more to do for it)."""
    new = _follow(round_.ctx, round_.obs, view)
    if new is None:
        round_.plan.soon(1.0)
        return True
    if new.state.terminal:
        _finish(round_.plan, view, new)
        if _is_stop(view):
            if new.state is SavepointState.COMPLETED:
                round_.outlook.completed_stop = view
            else:
                round_.outlook.failed_stop = view
        return False
    round_.plan.actions.append(PatchSavepoint(view.name, new))
    round_.in_flight = new.trigger_id is not None
    return True


def _stop_request(round_: _Round, view: SavepointView) -> None:
    """A live stop Savepoint: the job is stopping; a user's one also sets the job's spec.state."""
    assert view.spec is not None
    stop = view.spec.stop
    if stop is StopMode.NONE:
        return
    round_.outlook.active_stop = round_.outlook.active_stop or view
    wanted = _DESIRED[stop]
    if round_.ctx.spec.state is not wanted and not view.owned:
        round_.plan.actions.append(SetDesiredState(wanted, view.name))
        round_.plan.events.append(
            Event(
                "Normal",
                "StopRequested",
                f"Savepoint {view.name} asks to stop with {stop.value}: spec.state={wanted.value}",
            )
        )


def _not_triggered(round_: _Round, view: SavepointView) -> None:
    """Trigger a Savepoint not triggered yet, once the job runs and nothing else is in flight."""
    assert view.spec is not None
    ctx, obs, plan = round_.ctx, round_.obs, round_.plan
    if round_.in_flight or round_.triggered_now or view.deleting:
        return  # a Savepoint deleted before it was triggered is not taken at all
    if view.spec.dispose_on_delete and not view.finalized:
        # Its files may only be written once the finalizer that removes them is on the object: a
        # Savepoint deleted right after creation would otherwise leave them behind.
        plan.soon(1.0)
        return
    job_id = round_.live_job_id
    if round_.running and job_id is not None:
        plan.actions.append(_trigger(ctx, view, job_id))
        plan.events.append(
            Event(
                "Normal",
                "SavepointTriggered",
                f"savepoint {view.name} (stop: {view.spec.stop.value}) triggered on job {job_id}",
            )
        )
        round_.triggered_now = True
        plan.soon(1.0)
    elif obs.pod is None or obs.pod.exited:
        error = (
            f"StreamJob {ctx.owner.name!r} is not running (lifecycle "
            f"{ctx.status.lifecycle_state.value}); a savepoint needs a running job"
        )
        _finish(plan, view, _with(view, state=SavepointState.FAILED, error=error))
        if round_.outlook.active_stop is view:
            round_.outlook.active_stop = None
    else:
        plan.soon(2.0)  # the coordinator is starting; trigger once the job runs


def _trigger(ctx: JobContext, view: SavepointView, job_id: str) -> TriggerSavepoint:
    """The trigger, with both ways its attempt can go: accepted, or refused (counted against backoff)."""
    assert view.spec is not None
    failures = view.status.failures + 1
    refused = SavepointState.FAILED if failures > view.spec.backoff_limit else SavepointState.PENDING
    return TriggerSavepoint(
        view.name,
        _REST_STOP[view.spec.stop],
        view.spec.target_directory or m.savepoint_dir(ctx.spec, ctx.owner, ctx.config),
        job_id,
        accepted=_with(view, state=SavepointState.IN_PROGRESS, job_id=job_id, error=None),
        refused=_with(view, state=refused, failures=failures),
        uid=view.uid,
        request_id=request_id(view),
    )


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
        answer = poll.status
        if answer == TriggerState.COMPLETED:
            return _with(
                view,
                state=SavepointState.COMPLETED,
                path=poll.path,
                checkpoint_id=poll.checkpoint_id,
                completion_time=rfc3339(ctx.now_ms),
                error=None,
            )
        if answer == TriggerState.IN_PROGRESS:
            return None
        failures = status.failures + 1
        error = poll.error or f"the coordinator answered {answer}"
        if failures > view.spec.backoff_limit:
            return _with(view, state=SavepointState.FAILED, failures=failures, error=error, trigger_id=None)
        return _with(view, state=SavepointState.PENDING, failures=failures, error=error, trigger_id=None)
    result = obs.result
    if result is not None and result.job_id == status.job_id:
        if (
            view.spec.stop is not StopMode.NONE
            and result.stop_savepoint
            and result.state == RunState.FINISHED
            and _ours(result, view)
        ):
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
        generation=ctx.generation,
    )
    plan.actions.append(CreateSavepoint(manifest))
    name = m.savepoint_name(ctx.owner.name, kind, ctx.generation)
    plan.events.append(
        Event(
            "Normal",
            "StopWithSavepoint",
            f"stopping with a savepoint ({stop.value}): Savepoint {name}",
        )
    )
    plan.soon(1.0)
