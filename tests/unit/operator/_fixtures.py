"""Small builders of specs and runs shared by the operator unit tests."""

from __future__ import annotations

from typing import Any

from sluice_operator.manifests import Owner, Run
from sluice_operator.models import OperatorConfig, StreamJobSpec

OWNER = Owner(name="counts", namespace="jobs", uid="0b7c5a6e-uid")
CONFIG = OperatorConfig(storage="s3://bucket/sluice", job_env={"AWS_ENDPOINT_URL": "http://127.0.0.1:5000"})


def spec(**overrides: Any) -> StreamJobSpec:
    base: dict[str, Any] = {
        "image": "sluice:dev",
        "pipeline": {
            "file": "examples/unbounded_counts.py",
            "args": {"out": "$(SLUICE_STORAGE)/out/$(SLUICE_JOB_NAME)"},
        },
        "parallelism": 4,
        "taskManagers": {"replicas": 2},
    }
    base.update(overrides)
    return StreamJobSpec.model_validate(base)


def run(restore_from: str | None = None, **overrides: Any) -> Run:
    return Run(owner=OWNER, spec=spec(**overrides), config=CONFIG, job_id="a" * 32, restore_from=restore_from)
