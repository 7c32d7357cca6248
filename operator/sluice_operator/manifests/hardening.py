"""Security contexts and writable scratch space that keep job pods within the `restricted` standard.

The root file system is read-only, so everything the processes write goes to emptyDirs: /tmp (Python
and the JVM's temporary files, and the coordinator's Spark local dirs), HOME (caches such as Sluice's
JVM class-data archive and Ivy's), and Spark's local dirs. Executors get their local dirs from Spark
itself: it adds an emptyDir at each of the driver's SPARK_LOCAL_DIRS to every executor pod.
"""

from __future__ import annotations

import copy
from typing import Any

# Where the image's HOME is (the Dockerfile sets HOME to it); an emptyDir makes it writable.
HOME_DIR = "/home/sluice"
SPARK_LOCAL_DIR = "/var/data/spark-local"

POD_SECURITY_CONTEXT: dict[str, Any] = {
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER_SECURITY_CONTEXT: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}

_SCRATCH = (("sluice-tmp", "/tmp"), ("sluice-home", HOME_DIR))


def pod_security_context() -> dict[str, Any]:
    return copy.deepcopy(POD_SECURITY_CONTEXT)


def container_security_context() -> dict[str, Any]:
    return copy.deepcopy(CONTAINER_SECURITY_CONTEXT)


def scratch_volumes(spark_local: bool) -> list[dict[str, Any]]:
    """emptyDirs for what the processes write; `spark_local` adds one for the driver's local dirs."""
    names = [name for name, _ in _SCRATCH] + (["sluice-spark-local"] if spark_local else [])
    return [{"name": name, "emptyDir": {}} for name in names]


def scratch_mounts(spark_local: bool) -> list[dict[str, Any]]:
    mounts = [{"name": name, "mountPath": path} for name, path in _SCRATCH]
    if spark_local:
        mounts.append({"name": "sluice-spark-local", "mountPath": SPARK_LOCAL_DIR})
    return mounts
