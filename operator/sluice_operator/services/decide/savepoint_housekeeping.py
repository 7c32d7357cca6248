"""Savepoints the operator takes and removes on its own: periodic ones, and the history limits."""

from __future__ import annotations

from sluice_operator import manifests as m
from sluice_operator.models import SavepointKind, SavepointState, StopMode, duration_ms
from sluice_operator.models import constants as c

from ..common._time import millis
from ..common.context import JobContext
from ..common.observed import Observed, SavepointView
from ..common.plan import CreateSavepoint, DeleteSavepoint, Plan


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
