"""Validation of what users wrote, with messages that name the field and say how to fix it."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from sluice_operator import manifests as m
from sluice_operator.manifests.coordinator_args import SPARK_AUTH_KEY
from sluice_operator.models import DegradedReason, OperatorConfig, SavepointSpec, StreamJobSpec
from sluice_operator.models.config import ENV_ALLOW_PRIVILEGED

from .privileges import escalations

_Model = TypeVar("_Model", bound=BaseModel)


class InvalidSpecError(ValueError):
    """The spec cannot be acted on; the message is meant for the user (status, events), `reason` names
    the Degraded condition's reason."""

    def __init__(self, message: str, reason: DegradedReason = DegradedReason.INVALID_SPEC) -> None:
        super().__init__(message)
        self.reason = reason


def describe(error: ValidationError, prefix: str = "spec") -> str:
    parts = []
    for item in error.errors():
        where = ".".join([prefix, *(str(p) for p in item["loc"])])
        message = str(item["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if item["loc"] or prefix else message)
    return "; ".join(parts)


def _parse(model: type[_Model], raw: Any) -> _Model:
    if not isinstance(raw, dict):
        raise InvalidSpecError("spec is missing or is not an object")
    try:
        return model.model_validate(raw)
    except ValidationError as error:
        raise InvalidSpecError(describe(error)) from None


def streamjob_spec(raw: Any) -> StreamJobSpec:
    """The validated spec, or InvalidSpecError listing every problem found."""
    spec = _parse(StreamJobSpec, raw)
    problems = []
    auth = spec.spark_conf.get(SPARK_AUTH_KEY)
    if auth is not None and auth != "true":
        problems.append(
            f"spec.sparkConf: {SPARK_AUTH_KEY}={auth} is not allowed: Spark's RPC between the coordinator "
            "and the TaskManagers is always authenticated on Kubernetes (else any pod reaching them could "
            "join the job and run code in it); remove it. spark.network.crypto.enabled=true also encrypts it"
        )
    owned = sorted(set(spec.spark_conf) & m.OPERATOR_SPARK_KEYS)
    secrets = [key for key in owned if key.startswith(SPARK_AUTH_KEY)]
    if secrets:
        problems.append(
            f"spec.sparkConf: {', '.join(secrets)} {'is' if len(secrets) == 1 else 'are'} set by the "
            f"operator: Spark's secret is generated per job and kept in Secret "
            f"{m.job_secret_name('<job>')}; remove them from sparkConf"
        )
    owned = [key for key in owned if key not in secrets]
    if owned:
        problems.append(
            f"spec.sparkConf: {', '.join(owned)} {'is' if len(owned) == 1 else 'are'} set by the operator "
            "from the StreamJob (image, taskManagers, namespace); remove them from sparkConf"
        )
    try:
        m.executor_resources(spec.task_managers.resources)
    except ValueError as error:
        problems.append(f"spec.{error}")
    if spec.parallelism < spec.task_managers.replicas:
        problems.append(
            f"spec.taskManagers.replicas ({spec.task_managers.replicas}) is more than spec.parallelism "
            f"({spec.parallelism}): TaskManagers beyond the parallelism would stay idle; lower the replicas"
        )
    if problems:
        raise InvalidSpecError("; ".join(problems))
    return spec


def refuse_escalations(spec: StreamJobSpec, allowed: bool) -> None:
    """InvalidSpecError naming every field that escalates the job's pods, unless the operator allows it."""
    found = [] if allowed else escalations(spec)
    if found:
        raise InvalidSpecError(
            "; ".join(found) + f". The operator refuses pods beyond the restricted Pod Security Standard "
            f"unless it runs with {ENV_ALLOW_PRIVILEGED}=true (Helm: operator.allowPrivilegedPods=true)"
        )


def require_storage(spec: StreamJobSpec, config: OperatorConfig) -> None:
    """InvalidSpecError if the job would have nowhere to keep checkpoints and savepoints."""
    problem = m.missing_storage(spec, config)
    if problem is not None:
        raise InvalidSpecError(problem, reason=DegradedReason.NO_STORAGE)


def savepoint_spec(raw: Any) -> SavepointSpec:
    return _parse(SavepointSpec, raw)
