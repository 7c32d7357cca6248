"""Validation of what users wrote, with messages that name the field and say how to fix it."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from sluice_operator import manifests as m
from sluice_operator.models import SavepointSpec, StreamJobSpec

_Model = TypeVar("_Model", bound=BaseModel)


class InvalidSpecError(ValueError):
    """The spec cannot be acted on; the message is meant for the user (status, events)."""


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
    owned = sorted(set(spec.spark_conf) & m.OPERATOR_SPARK_KEYS)
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


def savepoint_spec(raw: Any) -> SavepointSpec:
    return _parse(SavepointSpec, raw)
