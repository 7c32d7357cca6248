"""What every decision about a StreamJob starts from, gathered the same way for reconcile and deletion.

The job object's owner, generation and recorded status, its checkpoint storage, and everything
`observe_job` sees: one `JobContext` and one `Observed`.
"""

from __future__ import annotations

from dataclasses import dataclass

from sluice_operator import manifests as m
from sluice_operator.models import OperatorConfig, StreamJobSpec

from ..clients.deps import Deps
from ..clients.storage import Storage, storage_options
from ..common.context import JobContext
from ..common.objects import StreamJobObject
from ..common.observed import Observed
from .job import observe_job


async def job_storage(
    deps: Deps,
    config: OperatorConfig,
    namespace: str,
    spec: StreamJobSpec | None,
    uri: str,
    *,
    state_key: bytes | None = None,
) -> Storage:
    """The job's storage; with the namespace's `state_key` it believes the job results that key sealed
    (without it, none)."""
    secret = (spec.storage_secret if spec is not None else None) or config.storage_secret
    data = await deps.kube.secret_data(namespace, secret) if secret else None
    return Storage(storage_options(uri, data or {}), state_key=state_key)


@dataclass(frozen=True)
class Gathered:
    ctx: JobContext
    obs: Observed
    storage: Storage
    checkpoint_dir: str


async def gather(
    deps: Deps,
    config: OperatorConfig,
    job: StreamJobObject,
    spec: StreamJobSpec,
    *,
    rest_token: str | None,
    state_key: bytes | None,
    now_ms: int,
    new_job_id: str,
) -> Gathered:
    """Observe the job whose valid `spec` was read from `job`, and the context to decide on it in."""
    owner, status = job.owner, job.status
    checkpoint_dir = m.checkpoint_dir(spec, owner, config)
    storage = await job_storage(deps, config, owner.namespace, spec, checkpoint_dir, state_key=state_key)
    obs = await observe_job(
        deps,
        storage=storage,
        owner=owner,
        spec=spec,
        status=status,
        checkpoint_dir=checkpoint_dir,
        rest_token=rest_token,
    )
    ctx = JobContext(
        owner=owner,
        generation=job.meta.generation,
        spec=spec,
        status=status,
        config=config,
        now_ms=now_ms,
        new_job_id=new_job_id,
    )
    return Gathered(ctx, obs, storage, checkpoint_dir)


__all__ = ["Gathered", "gather", "job_storage"]
