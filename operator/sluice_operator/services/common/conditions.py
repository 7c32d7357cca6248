"""Kubernetes-style conditions: `lastTransitionTime` moves only when a condition's status flips.

Deciding sets the job's own conditions with it, recording the ones of what acting did (`Monitored`).
"""

from __future__ import annotations

from sluice_operator.models import Condition, ConditionType

from ._time import rfc3339


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
