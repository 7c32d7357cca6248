"""The example StreamJobs of examples/k8s/ as the e2e tests apply them: by default on one TaskManager.

Each TaskManager is a pod with a Spark executor JVM of its own, and every job also runs its coordinator's
JVM (the Spark driver): on the two-core test machine a JVM's start is most of a job's start. So a test
runs the unbounded example on one TaskManager (its `parallelism: 2` stays: both generator splits run,
which the exactly-once check of _outputs.py relies on) unless the behaviour it checks needs more than
one: a TaskManager killed among others, a rescale from two to one, the data connections between
TaskManagers. Such a test asks for `task_managers=2`.
"""

from __future__ import annotations

from typing import Any

import yaml

from e2e._cluster import EXAMPLES

UNBOUNDED = EXAMPLES / "streamjob.yaml"
UNBOUNDED_NAME: str = yaml.safe_load(UNBOUNDED.read_text())["metadata"]["name"]


def unbounded_manifest(*, task_managers: int = 1) -> dict[str, Any]:
    """examples/k8s/streamjob.yaml, parsed, with `task_managers` TaskManager pods."""
    manifest: dict[str, Any] = yaml.safe_load(UNBOUNDED.read_text())
    if task_managers > int(manifest["spec"]["parallelism"]):
        raise ValueError(f"{task_managers} TaskManagers for parallelism {manifest['spec']['parallelism']}")
    manifest["spec"]["taskManagers"]["replicas"] = task_managers
    return manifest


def unbounded_job(*, task_managers: int = 1) -> str:
    """examples/k8s/streamjob.yaml with `task_managers` TaskManager pods, as YAML for `kubectl apply`."""
    return yaml.safe_dump(unbounded_manifest(task_managers=task_managers))
