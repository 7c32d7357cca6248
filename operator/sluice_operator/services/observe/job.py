"""Gathering what a reconcile looks at: pods, the coordinator's REST API, storage, Savepoint objects."""

from __future__ import annotations

from sluice_contract.checkpoints import NoRestorableCheckpoint
from sluice_operator import manifests as m
from sluice_operator.kube import Kube, Obj
from sluice_operator.manifests.coordinator_args import COORDINATOR_CONTAINER
from sluice_operator.models import (
    REST_PORT,
    REST_PORT_NAME,
    PodPhase,
    SavepointStatus,
    StreamJobSpec,
    StreamJobStatus,
)
from sluice_operator.models import constants as c

from ..clients.deps import Deps
from ..clients.rest import Coordinator, CoordinatorError
from ..clients.storage import Storage
from ..common._time import millis
from ..common.objects import ObjectMeta
from ..common.observed import CoordinatorView, Observed, PodView, SavepointView
from .validate import InvalidSpecError, savepoint_spec


def pod_view(pod: Obj) -> PodView:
    meta = ObjectMeta.parse(pod)
    status = pod.get("status") or {}
    reason = status.get("reason")
    exit_code, finished = None, None
    rest_port = REST_PORT
    for container in (pod.get("spec") or {}).get("containers") or []:
        if container.get("name") == COORDINATOR_CONTAINER:
            # The port this pod was made with: the operator's setting may have changed since.
            for port in container.get("ports") or []:
                if port.get("name") == REST_PORT_NAME and isinstance(port.get("containerPort"), int):
                    rest_port = port["containerPort"]
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated")
        if terminated and container.get("name") == COORDINATOR_CONTAINER:
            exit_code = terminated.get("exitCode")
            finished = millis(terminated.get("finishedAt"))
            reason = f"{terminated.get('reason') or 'exited'}, exit code {exit_code}"
    return PodView(
        name=meta.name,
        phase=str(status.get("phase") or PodPhase.PENDING),
        ip=status.get("podIP"),
        rest_port=rest_port,
        job_id=meta.annotations.get(c.ANNOTATION_JOB_ID),
        spec_hash=meta.annotations.get(c.ANNOTATION_SPEC_HASH),
        restored_from=meta.annotations.get(c.ANNOTATION_RESTORED_FROM),
        terminating=meta.deleting,
        reason=reason,
        exit_code=exit_code if isinstance(exit_code, int) else None,
        finished_ms=finished,
    )


def savepoint_view(obj: Obj, job_uid: str | None) -> SavepointView:
    meta = ObjectMeta.parse(obj)
    spec, error = None, None
    try:
        spec = savepoint_spec(obj.get("spec"))
    except InvalidSpecError as problem:
        error = str(problem)
    try:
        status = SavepointStatus.model_validate(obj.get("status") or {})
    except ValueError:
        status = SavepointStatus()
    return SavepointView(
        name=meta.name,
        namespace=meta.namespace,
        spec=spec,
        status=status,
        labels=dict(meta.labels),
        created=meta.created,
        owned=meta.owned_by(job_uid),
        spec_error=error,
        uid=meta.uid,
        deleting=meta.deleting,
        finalized=c.FINALIZER in meta.finalizers,
    )


async def job_savepoints(kube: Kube, namespace: str, name: str, job_uid: str | None) -> list[SavepointView]:
    items = await kube.list_custom(c.SAVEPOINT_PLURAL, namespace)
    return [savepoint_view(i, job_uid) for i in items if (i.get("spec") or {}).get("jobName") == name]


async def observe_job(
    deps: Deps,
    *,
    storage: Storage,
    owner: m.Owner,
    spec: StreamJobSpec,
    status: StreamJobStatus,
    checkpoint_dir: str,
    rest_token: str | None,
) -> Observed:
    obs = Observed(rest_token=rest_token)
    pods = await deps.kube.list_pods(owner.namespace, f"{c.LABEL_JOB}={owner.name}")
    named = [(ObjectMeta.parse(pod).name, pod) for pod in pods]
    coordinator = m.coordinator_name(owner.name)
    coordinator_pod = next((pod for name, pod in named if name == coordinator), None)
    obs.pod = pod_view(coordinator_pod) if coordinator_pod is not None else None
    if obs.pod is None or obs.pod.exited:
        obs.stray_pods = [name for name, pod in named if pod is not coordinator_pod]
    obs.savepoints = await job_savepoints(deps.kube, owner.namespace, owner.name, owner.uid)
    if obs.pod is not None and obs.pod.phase == PodPhase.RUNNING and obs.pod.ip and not obs.pod.terminating:
        await _ask_coordinator(deps, obs, obs.pod.ip, obs.pod.rest_port, rest_token)
    run_id = obs.pod.job_id if obs.pod is not None else (status.job.id if status.job else None)
    try:
        if run_id:
            obs.result = await storage.job_result(checkpoint_dir, run_id)
        if obs.result is not None and obs.result.last_checkpoint:
            obs.last_result_snapshot = await storage.snapshot(obs.result.last_checkpoint)
        if obs.coordinator is None and run_id:
            # Only the run's own checkpoints: an older run's would undo what this run committed since.
            obs.latest_checkpoint = await storage.latest_checkpoint(checkpoint_dir, run_id)
    except NoRestorableCheckpoint as error:
        obs.storage_error = (
            f"{error}. Delete the damaged checkpoint directories under {checkpoint_dir} to have the next "
            "run start from an older one (or, with none left, from where this run started)"
        )
    except Exception as error:  # any storage backend error: report it, decide nothing from missing data
        obs.storage_error = f"cannot read {checkpoint_dir}: {type(error).__name__}: {error}"
    return obs


async def _ask_coordinator(deps: Deps, obs: Observed, ip: str, port: int, token: str | None) -> None:
    client = Coordinator(deps.http, ip, port, token)
    try:
        job = await client.job()
        checkpoints = await client.checkpoints()
    except CoordinatorError as error:
        obs.coordinator_error = str(error)
        return
    obs.coordinator = CoordinatorView(job=job, checkpoints=checkpoints)
    for view in obs.savepoints:
        trigger = view.status.trigger_id
        if trigger and not view.status.state.terminal and view.status.job_id == obs.coordinator.job_id:
            try:
                obs.savepoint_polls[trigger] = await client.savepoint(trigger)
            except CoordinatorError as error:
                obs.coordinator_error = str(error)
