"""What the job's Secret and the namespace's state key Secret hold, read for the calls a reconcile makes.

Their values never leave the operator: they are not logged, not put into status or events, and only the
pods' volume mounts and the operator's Authorization header carry them.
"""

from __future__ import annotations

from sluice_operator import manifests as m
from sluice_operator.kube import Kube


async def rest_token(kube: Kube, owner: m.Owner) -> str | None:
    """The token of the job's coordinator; None if the job has no Secret (a coordinator from before)."""
    found = await kube.secret(owner.namespace, m.job_secret_name(owner.name))
    if found is None:
        return None
    return found[1].get(m.REST_TOKEN_KEY) or None


async def state_key(kube: Kube, namespace: str) -> bytes | None:
    """The namespace's state key, which coordinators seal job results with; None while it has none (or
    an unusable one, which reconcile reports)."""
    return m.usable_state_key(await kube.secret_data(namespace, m.STATE_KEY_SECRET))


__all__ = ["rest_token", "state_key"]
