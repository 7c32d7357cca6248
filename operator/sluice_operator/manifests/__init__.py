"""Pure builders: StreamJob spec (and a run's job id and restore point) -> Kubernetes manifests."""

from ._common import (
    Manifest,
    Owner,
    config_map_name,
    coordinator_name,
    driver_account_name,
    labels,
    merge_pod,
    rest_service_name,
    taskmanager_prefix,
)
from .coordinator import config_map, coordinator_pod, dashboard_url, rest_service
from .coordinator_args import OPERATOR_SPARK_KEYS, executor_resources, sluice_run_args, spark_conf
from .network import network_policy, network_policy_name
from .pod_monitor import (
    POD_MONITOR_CRD,
    POD_MONITOR_GROUP,
    POD_MONITOR_KIND,
    POD_MONITOR_PATH,
    POD_MONITOR_PLURAL,
    POD_MONITOR_VERSION,
    pod_monitor,
    pod_monitor_name,
)
from .rbac import DRIVER_RULES, driver_role, driver_role_binding, driver_service_account
from .run import (
    Run,
    StorageMissingError,
    checkpoint_dir,
    deployed_spec_json,
    expand,
    missing_storage,
    savepoint_dir,
    spec_hash,
)
from .savepoint import operator_savepoint, savepoint_name
from .savepoint_targets import allowed_savepoint_prefixes, target_refusal
from .secret import (
    REST_TOKEN_KEY,
    SPARK_SECRET_KEY,
    STATE_KEY_KEY,
    STATE_KEY_SECRET,
    job_secret,
    job_secret_name,
    state_key_secret,
)
from .taskmanager import taskmanager_pod_template

__all__ = [
    "DRIVER_RULES",
    "OPERATOR_SPARK_KEYS",
    "POD_MONITOR_CRD",
    "POD_MONITOR_GROUP",
    "POD_MONITOR_KIND",
    "POD_MONITOR_PATH",
    "POD_MONITOR_PLURAL",
    "POD_MONITOR_VERSION",
    "REST_TOKEN_KEY",
    "SPARK_SECRET_KEY",
    "STATE_KEY_KEY",
    "STATE_KEY_SECRET",
    "Manifest",
    "Owner",
    "Run",
    "StorageMissingError",
    "allowed_savepoint_prefixes",
    "checkpoint_dir",
    "config_map",
    "config_map_name",
    "coordinator_name",
    "coordinator_pod",
    "dashboard_url",
    "deployed_spec_json",
    "driver_account_name",
    "driver_role",
    "driver_role_binding",
    "driver_service_account",
    "executor_resources",
    "expand",
    "job_secret",
    "job_secret_name",
    "labels",
    "merge_pod",
    "missing_storage",
    "network_policy",
    "network_policy_name",
    "operator_savepoint",
    "pod_monitor",
    "pod_monitor_name",
    "rest_service",
    "rest_service_name",
    "savepoint_dir",
    "savepoint_name",
    "sluice_run_args",
    "spark_conf",
    "spec_hash",
    "state_key_secret",
    "target_refusal",
    "taskmanager_pod_template",
    "taskmanager_prefix",
]
