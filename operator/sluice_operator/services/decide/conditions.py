"""Kubernetes-style conditions: `lastTransitionTime` moves only when a condition's status flips."""

from __future__ import annotations

from sluice_operator.models import Condition, ConditionType, DegradedReason, JobState, LifecycleState

from ..common._time import rfc3339

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


def set_condition(
    conditions: list[Condition],
    kind: ConditionType,
    status: bool,
    reason: str,
    message: str,
    *,
    generation: int,
    now_ms: int,
) -> list[Condition]:
    """`conditions` with the one of type `kind` replaced (moved to the end, as Kubernetes lists them)."""
    text = "True" if status else "False"
    previous = next((c for c in conditions if c.type == kind), None)
    changed = previous is None or previous.status != text
    entry = Condition(
        type=kind.value,
        status=text,
        reason=str(reason),  # a reason enum's plain text
        message=message,
        last_transition_time=rfc3339(now_ms)
        if changed or previous is None
        else previous.last_transition_time,
        observed_generation=generation,
    )
    return [c for c in conditions if c.type != kind] + [entry]


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
