"""Names shared by the CRDs, the manifests and the handlers."""

from __future__ import annotations

GROUP = "sluice.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

STREAMJOB_KIND = "StreamJob"
STREAMJOB_PLURAL = "streamjobs"
STREAMJOB_SINGULAR = "streamjob"
STREAMJOB_SHORT_NAMES = ["sj"]

SAVEPOINT_KIND = "Savepoint"
SAVEPOINT_PLURAL = "savepoints"
SAVEPOINT_SINGULAR = "savepoint"
SAVEPOINT_SHORT_NAMES = ["sp"]

FINALIZER = f"{GROUP}/finalizer"

LABEL_JOB = f"{GROUP}/job"
LABEL_ROLE = f"{GROUP}/role"
LABEL_TRIGGER = f"{GROUP}/trigger"
# On a stop Savepoint: the StreamJob generation it stops (a failed one blocks that generation only).
LABEL_GENERATION = f"{GROUP}/job-generation"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "sluice-operator"

ROLE_COORDINATOR = "coordinator"
ROLE_TASKMANAGER = "taskmanager"

ANNOTATION_JOB_ID = f"{GROUP}/job-id"
ANNOTATION_SPEC_HASH = f"{GROUP}/spec-hash"
ANNOTATION_RESTORED_FROM = f"{GROUP}/restored-from"

# The coordinators' REST port: the default one in their pods, and the port of each job's Service always.
REST_PORT = 8081
# The coordinator container's name for it, which the Service, probe and PodMonitor refer to.
REST_PORT_NAME = "rest"
