"""The two CustomResourceDefinitions, built from the models."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from sluice_operator.models import SavepointSpec, SavepointStatus, StreamJobSpec, StreamJobStatus
from sluice_operator.models import constants as c

from ._structural import structural

_IMMUTABLE = {
    "rule": "self == oldSelf",
    "message": "a Savepoint cannot be changed once created; create a new Savepoint instead",
}


def _schema(model: type[BaseModel], mode: str) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation" if mode == "spec" else "serialization")
    schema = structural(raw)
    # Only the operator writes status; defaults there would let the apiserver invent observations.
    return schema if mode == "spec" else _without_defaults(schema)


def _without_defaults(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_defaults(v) for k, v in node.items() if k != "default"}
    if isinstance(node, list):
        return [_without_defaults(v) for v in node]
    return node


def _crd(
    *,
    kind: str,
    plural: str,
    singular: str,
    short_names: list[str],
    spec: dict[str, Any],
    status: dict[str, Any],
    columns: list[dict[str, Any]],
    description: str,
) -> dict[str, Any]:
    root = {
        "type": "object",
        "description": description,
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{c.GROUP}",
            "labels": {"app.kubernetes.io/part-of": "sluice"},
            "annotations": {"sluice.dev/generated-by": "python -m sluice_operator.crdgen"},
        },
        "spec": {
            "group": c.GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": singular,
                "shortNames": short_names,
                "categories": ["sluice"],
            },
            "versions": [
                {
                    "name": c.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {"openAPIV3Schema": root},
                }
            ],
        },
    }


def _age() -> dict[str, Any]:
    return {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def streamjob_crd() -> dict[str, Any]:
    return _crd(
        kind=c.STREAMJOB_KIND,
        plural=c.STREAMJOB_PLURAL,
        singular=c.STREAMJOB_SINGULAR,
        short_names=c.STREAMJOB_SHORT_NAMES,
        spec=_schema(StreamJobSpec, "spec"),
        status=_schema(StreamJobStatus, "status"),
        description="A Sluice streaming job: a coordinator (Spark driver) and its TaskManagers.",
        columns=[
            {"name": "State", "type": "string", "jsonPath": ".spec.state", "description": "Desired state"},
            {"name": "Lifecycle", "type": "string", "jsonPath": ".status.lifecycleState"},
            {"name": "Parallelism", "type": "integer", "jsonPath": ".spec.parallelism"},
            {"name": "Last-Checkpoint", "type": "integer", "jsonPath": ".status.lastCheckpoint.id"},
            {"name": "Job", "type": "string", "jsonPath": ".status.job.state", "priority": 1},
            {
                "name": "Records/s",
                "type": "number",
                "jsonPath": ".status.job.recordsReadPerSecond",
                "description": "Records the sources read per second",
                "priority": 1,
            },
            {
                "name": "Checkpointed",
                "type": "date",
                "jsonPath": ".status.lastCheckpoint.time",
                "description": "How long ago the last checkpoint completed",
                "priority": 1,
            },
            {
                "name": "Last-Savepoint",
                "type": "string",
                "jsonPath": ".status.lastSavepoint.path",
                "priority": 1,
            },
            _age(),
        ],
    )


def savepoint_crd() -> dict[str, Any]:
    spec = _schema(SavepointSpec, "spec")
    spec["x-kubernetes-validations"] = [_IMMUTABLE]
    return _crd(
        kind=c.SAVEPOINT_KIND,
        plural=c.SAVEPOINT_PLURAL,
        singular=c.SAVEPOINT_SINGULAR,
        short_names=c.SAVEPOINT_SHORT_NAMES,
        spec=spec,
        status=_schema(SavepointStatus, "status"),
        description="A savepoint of a StreamJob, optionally the way the job stops.",
        columns=[
            {"name": "Job", "type": "string", "jsonPath": ".spec.jobName"},
            {"name": "Stop", "type": "string", "jsonPath": ".spec.stop"},
            {"name": "State", "type": "string", "jsonPath": ".status.state"},
            {"name": "Path", "type": "string", "jsonPath": ".status.path"},
            {"name": "Error", "type": "string", "jsonPath": ".status.error", "priority": 1},
            _age(),
        ],
    )
