"""A Savepoint object on its own: failed when its job does not exist, its files disposed of on deletion."""

from __future__ import annotations

from sluice_operator.kube import Obj
from sluice_operator.manifests import Owner
from sluice_operator.models import OperatorConfig
from sluice_operator.models import constants as c

from .act.execute import execute
from .clients.deps import Deps
from .common.objects import StreamJobObject
from .common.observed import Observed
from .common.outcome import Finalized
from .common.plan import DisposeSavepointFiles, Plan
from .decide.savepoint_alone import fail_alone
from .observe.gather import job_storage
from .observe.job import savepoint_view
from .observe.validate import InvalidSpecError, streamjob_spec


async def reconcile_savepoint(deps: Deps, savepoint: Obj) -> bool:
    """What only a Savepoint itself can tell: its job does not exist. The rest is up to the job.
    True if that failed the Savepoint now."""
    view = savepoint_view(savepoint, None)
    if view.status.state.terminal or view.deleting:
        return False
    namespace = view.namespace
    job_exists = (
        view.spec is not None
        and await deps.kube.get_custom(c.STREAMJOB_PLURAL, namespace, view.spec.job_name) is not None
    )
    plan = fail_alone(view, namespace, job_exists=job_exists)
    if plan is None:
        return False
    await execute(deps, Observed(), plan, _no_job(namespace))
    return True


def _no_job(namespace: str) -> Owner:
    """Where a Savepoint's own plan is executed: its namespace, with no StreamJob to act for."""
    return Owner(name="", namespace=namespace, uid="")


async def dispose_savepoint(deps: Deps, config: OperatorConfig, savepoint: Obj) -> Finalized:
    """On deletion of a Savepoint with disposeOnDelete: delete its files; done=True lets the finalizer go.

    A savepoint still in flight has no path yet but will write files: its deletion waits until it has
    ended (its job keeps following it), so that they do not outlive the object. Without the job nobody
    follows it any more, and there is nothing to wait for.
    """
    view = savepoint_view(savepoint, None)
    if view.spec is None or not view.spec.dispose_on_delete:
        return Finalized(True)
    ns = view.namespace
    job = await deps.kube.get_custom(c.STREAMJOB_PLURAL, ns, view.spec.job_name)
    if job is not None and view.status.trigger_id and not view.status.state.terminal:
        return Finalized(False, f"savepoint {view.name} is in progress; its files go once it has ended")
    path = view.status.path
    if not path:
        return Finalized(True)
    spec = None
    if job is not None:
        try:
            spec = streamjob_spec(StreamJobObject.parse(job).spec)
        except InvalidSpecError:
            spec = None
    storage = await job_storage(deps, config, ns, spec, path)
    dispose = DisposeSavepointFiles(view.name, path, view.uid)
    await execute(deps, Observed(), Plan(actions=[dispose]), _no_job(ns), storage=storage)
    return Finalized(True)


__all__ = ["dispose_savepoint", "reconcile_savepoint"]
