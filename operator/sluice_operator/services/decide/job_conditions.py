"""The conditions a StreamJob decision sets: Ready, Progressing and Degraded."""

from __future__ import annotations

from sluice_operator.models import Condition, ConditionType, DegradedReason, JobState, LifecycleState

from ..common.conditions import set_condition

_STABLE = {
    JobState.RUNNING: {LifecycleState.RUNNING},
    JobState.SUSPENDED: {LifecycleState.SUSPENDED},
    JobState.FINISHED: {LifecycleState.FINISHED},
}
_MOVING = {
    LifecycleState.CREATED,
    LifecycleState.DEPLOYING,
    LifecycleState.STOPPING,
    LifecycleState.UPGRADING,
    LifecycleState.DELETING,
}


def job_conditions(
    conditions: list[Condition],
    *,
    desired: JobState,
    lifecycle: LifecycleState,
    error: str | None,
    degraded_reason: DegradedReason,
    generation: int,
    now_ms: int,
) -> list[Condition]:
    """Ready: the job is where spec.state asks; Progressing: on its way; Degraded: something is wrong."""
    ready = lifecycle in _STABLE[desired] or (
        desired is JobState.RUNNING and lifecycle is LifecycleState.FINISHED
    )
    out = set_condition(
        conditions,
        ConditionType.READY,
        ready and error is None,
        lifecycle.value,
        f"lifecycle {lifecycle.value}, desired state {desired.value}",
        generation=generation,
        now_ms=now_ms,
    )
    moving = lifecycle in _MOVING
    out = set_condition(
        out,
        ConditionType.PROGRESSING,
        moving,
        lifecycle.value,
        f"lifecycle {lifecycle.value}" if moving else "nothing in progress",
        generation=generation,
        now_ms=now_ms,
    )
    return set_condition(
        out,
        ConditionType.DEGRADED,
        error is not None,
        degraded_reason if error else DegradedReason.HEALTHY,
        error or "",
        generation=generation,
        now_ms=now_ms,
    )
