"""Creating the job's Secret and the namespace's state key Secret: once, never drawn again.

Reading them is observing's part (observe/auth.py). Their values never leave them: they are not
logged, not put into status or events, and only the pods' volume mounts and the operator's
Authorization header carry them.
"""

from __future__ import annotations

import secrets

from sluice_operator import manifests as m
from sluice_operator.kube import Kube


class JobSecretError(Exception):
    """The job's Secret exists but is not the operator's; the message says what to do."""


async def ensure_job_secret(kube: Kube, owner: m.Owner) -> str:
    """Create the job's Secret unless it exists (an existing one is kept, never drawn again); its token.

    Keeping it matters: a coordinator started with the old token would refuse the operator's calls, and
    TaskManagers with the old Spark secret would be refused by their driver.
    """
    name = m.job_secret_name(owner.name)
    found = await kube.secret(owner.namespace, name)
    if found is None:
        manifest = m.job_secret(owner, secrets.token_urlsafe(32), secrets.token_urlsafe(32))
        await kube.create(manifest)  # a Secret that appeared meanwhile is kept as it is
        found = await kube.secret(owner.namespace, name)
    if found is None:
        raise JobSecretError(f"Secret {name} was created but cannot be read back")
    owners, data = found
    if owner.uid not in owners:
        raise JobSecretError(
            f"Secret {name} exists but does not belong to StreamJob {owner.name} (it is another job's, or "
            f"one you made): the operator keeps the job's REST token and Spark secret there. Delete or "
            "rename it; the operator then creates its own"
        )
    missing = [key for key in (m.REST_TOKEN_KEY, m.SPARK_SECRET_KEY) if not data.get(key)]
    if missing:
        raise JobSecretError(
            f"Secret {name} lacks {', '.join(missing)}: delete it and the operator makes a new one"
        )
    return data[m.REST_TOKEN_KEY]


async def ensure_state_key(kube: Kube, namespace: str) -> bytes:
    """Create the namespace's state key Secret unless it exists; an existing one is never drawn again
    (every checkpoint and savepoint made with it would stop being restorable)."""
    found = await kube.secret(namespace, m.STATE_KEY_SECRET)
    if found is None:
        await kube.create(m.state_key_secret(namespace, secrets.token_hex(32)))  # one made meanwhile wins
        found = await kube.secret(namespace, m.STATE_KEY_SECRET)
    if found is None:
        raise JobSecretError(f"Secret {m.STATE_KEY_SECRET} was created but cannot be read back")
    key = m.usable_state_key(found[1])
    if key is None:
        raise JobSecretError(
            f"Secret {m.STATE_KEY_SECRET} must hold {m.STATE_KEY_KEY!r}: at least 64 hexadecimal digits, the "
            "key that authenticates this namespace's checkpoints and savepoints. Restore the one you had "
            "(without it, savepoints made with it are only restored with trustSavepoint), or delete the "
            "Secret and the operator makes a new one"
        )
    return key
