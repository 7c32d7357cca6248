"""The Spark host: the coordinator in the Spark driver, TaskManagers as one barrier stage per attempt.

Only this package imports PySpark (import-linter keeps the engine, the coordinator and the connectors
free of it), and it does so lazily where it can, so that `--host processes` never loads Spark.
"""

from sluice.hosts.spark._context import SparkLog, daemon_zygote_running, start_spark, stop_spark
from sluice.hosts.spark._errors import SparkSetupError
from sluice.hosts.spark._host import SparkHost
from sluice.hosts.spark._kubernetes import (
    CoordinatorPod,
    api_server_master,
    coordinator_pod_from_env,
    kubernetes_conf,
)
from sluice.hosts.spark._settings import is_local, local_master, spark_settings

__all__ = [
    "CoordinatorPod",
    "SparkHost",
    "SparkLog",
    "SparkSetupError",
    "api_server_master",
    "coordinator_pod_from_env",
    "daemon_zygote_running",
    "is_local",
    "kubernetes_conf",
    "local_master",
    "spark_settings",
    "start_spark",
    "stop_spark",
]
