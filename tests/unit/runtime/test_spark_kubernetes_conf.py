"""The Spark configuration of a coordinator running as a client-mode Spark driver in its own pod.

Pure functions, checked here; a later issue runs them against a real cluster.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.hosts.spark import (
    CoordinatorPod,
    SparkSetupError,
    api_server_master,
    coordinator_pod_from_env,
    kubernetes_conf,
    spark_settings,
)
from sluice.hosts.spark import _kubernetes as spark_kubernetes

POD_ENV = {
    "POD_NAME": "orders-coordinator",
    "POD_NAMESPACE": "streaming",
    "POD_IP": "10.244.1.7",
    "KUBERNETES_SERVICE_HOST": "10.96.0.1",
    "KUBERNETES_SERVICE_PORT": "443",
}


@pytest.fixture(autouse=True)
def extension_jar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for the jar scripts/build-jvm.sh builds (these tests only read its path)."""
    jar = tmp_path / "sluice-spark-kubernetes.jar"
    jar.write_bytes(b"PK")
    monkeypatch.setattr(spark_kubernetes, "EXTENSION_JAR", jar)
    return jar


def pod(**changes: str | None) -> CoordinatorPod:
    base = coordinator_pod_from_env(POD_ENV, service_account_dir=Path("/nonexistent"))
    fields = {**base.__dict__, **changes}
    return CoordinatorPod(**fields)


def test_pod_from_the_downward_api_and_the_kubelet_environment(tmp_path: Path) -> None:
    found = coordinator_pod_from_env(POD_ENV, service_account_dir=tmp_path)
    assert found == CoordinatorPod(
        job="orders",
        namespace="streaming",
        pod_name="orders-coordinator",
        pod_ip="10.244.1.7",
        api_host="10.96.0.1",
        api_port="443",
    )
    assert coordinator_pod_from_env(POD_ENV, job="payments", service_account_dir=tmp_path).job == "payments"


def test_the_service_account_ca_is_trusted_for_the_api_server(tmp_path: Path) -> None:
    # Spark's client-mode Kubernetes client does not pick up the mounted CA by itself.
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    found = coordinator_pod_from_env(POD_ENV, service_account_dir=tmp_path)
    assert found.ca_cert_file == str(tmp_path / "ca.crt")
    conf = kubernetes_conf(found, taskmanagers=1)
    assert conf["spark.kubernetes.authenticate.caCertFile"] == str(tmp_path / "ca.crt")
    assert "spark.kubernetes.authenticate.caCertFile" not in kubernetes_conf(pod(), taskmanagers=1)


def test_missing_pod_environment_names_every_variable_and_the_fix() -> None:
    with pytest.raises(SparkSetupError) as missing:
        coordinator_pod_from_env({k: v for k, v in POD_ENV.items() if k not in ("POD_IP", "POD_NAME")})
    message = str(missing.value)
    assert "POD_NAME, POD_IP are not set" in message
    assert "downward API" in message and "status.podIP" in message


def test_client_mode_driver_settings() -> None:
    conf = kubernetes_conf(pod(), taskmanagers=3)
    assert conf["spark.master"] == "k8s://https://10.96.0.1:443"
    assert conf["spark.submit.deployMode"] == "client"
    assert conf["spark.kubernetes.namespace"] == "streaming"
    assert conf["spark.driver.host"] == "10.244.1.7", "executors connect back to the pod IP"
    # Spark >= 4.1 hands executors the bind address as the driver's address.
    assert conf["spark.driver.bindAddress"] == "10.244.1.7"
    assert conf["spark.kubernetes.driver.pod.name"] == "orders-coordinator", "owner of the executor pods"


def test_one_single_core_executor_pod_per_taskmanager() -> None:
    conf = kubernetes_conf(pod(), taskmanagers=3)
    assert conf["spark.executor.instances"] == "3"
    assert conf["spark.executor.cores"] == "1" and conf["spark.task.cpus"] == "1"
    assert conf["spark.dynamicAllocation.enabled"] == "false"


def test_taskmanager_pods_are_named_and_labelled_after_the_job(extension_jar: Path) -> None:
    conf = kubernetes_conf(pod(), taskmanagers=2)
    # Spark names executor pods <prefix>-exec-<id>; the feature step, which the driver JVM loads from
    # the extension jar, makes them orders-taskmanager-1, -2, ... (the e2e tests see the real pods).
    assert conf["spark.kubernetes.executor.podNamePrefix"] == "orders-taskmanager"
    assert conf["spark.kubernetes.executor.pod.featureSteps"] == "dev.sluice.spark.TaskManagerPodName"
    assert conf["spark.driver.extraClassPath"] == str(extension_jar)
    assert conf["spark.kubernetes.executor.label.sluice.dev/job"] == "orders"
    assert conf["spark.kubernetes.executor.label.sluice.dev/role"] == "taskmanager"


def test_a_missing_extension_jar_is_an_error_that_says_how_to_build_it(tmp_path: Path) -> None:
    with pytest.raises(SparkSetupError) as missing:
        kubernetes_conf(pod(), taskmanagers=1, extension_jar=tmp_path / "gone.jar")
    assert "gone.jar is missing" in str(missing.value)
    assert "scripts/build-jvm.sh" in str(missing.value)


def test_user_feature_steps_and_driver_class_path_are_added_to_sluices(extension_jar: Path) -> None:
    cluster = kubernetes_conf(pod(), taskmanagers=1)
    settings = spark_settings(
        1,
        cluster["spark.master"],
        "orders",
        {
            "spark.kubernetes.executor.pod.featureSteps": "com.example.Sidecar",
            "spark.driver.extraClassPath": "/opt/extra.jar",
        },
        cluster=cluster,
    )
    assert settings["spark.kubernetes.executor.pod.featureSteps"] == (
        "dev.sluice.spark.TaskManagerPodName,com.example.Sidecar"
    )
    assert settings["spark.driver.extraClassPath"] == f"{extension_jar}:/opt/extra.jar"


def test_image_service_account_and_pod_template_when_given() -> None:
    bare = kubernetes_conf(pod(), taskmanagers=1)
    assert not any(
        key in bare
        for key in (
            "spark.kubernetes.container.image",
            "spark.kubernetes.authenticate.executor.serviceAccountName",
            "spark.kubernetes.executor.podTemplateFile",
        )
    )
    full = kubernetes_conf(
        pod(
            image="registry.local/sluice:1.2",
            service_account="orders-taskmanager",
            pod_template_file="/etc/sluice/taskmanager-pod.yaml",
        ),
        taskmanagers=1,
    )
    assert full["spark.kubernetes.container.image"] == "registry.local/sluice:1.2"
    assert full["spark.kubernetes.authenticate.executor.serviceAccountName"] == "orders-taskmanager"
    assert full["spark.kubernetes.executor.podTemplateFile"] == "/etc/sluice/taskmanager-pod.yaml"
    assert full["spark.kubernetes.executor.podTemplateContainerName"] == "taskmanager"


def test_ipv6_api_server_address_is_bracketed() -> None:
    assert api_server_master("fd00:10:96::1", "443") == "k8s://https://[fd00:10:96::1]:443"


@pytest.mark.parametrize("job", ["Orders", "orders_eu", "-orders", "o" * 42])
def test_job_names_that_cannot_name_pods_are_refused(job: str) -> None:
    with pytest.raises(SparkSetupError, match="cannot name TaskManager pods"):
        kubernetes_conf(pod(job=job), taskmanagers=1)


def test_kubernetes_layer_in_the_job_settings_and_user_settings_win() -> None:
    cluster = kubernetes_conf(pod(), taskmanagers=2)
    settings = spark_settings(
        2,
        "k8s://https://10.96.0.1:443",
        "sluice orders",
        {"spark.kubernetes.container.image": "sluice:dev", "spark.driver.host": "orders-rest"},
        cluster=cluster,
    )
    assert settings["spark.kubernetes.executor.podNamePrefix"] == "orders-taskmanager"
    assert settings["spark.kubernetes.container.image"] == "sluice:dev"
    assert settings["spark.driver.host"] == "orders-rest", "--spark-conf overrides the derived value"
    assert settings["spark.task.maxFailures"] == "1" and settings["spark.stage.maxConsecutiveAttempts"] == "1"


def test_executors_with_more_cores_still_host_one_taskmanager_each() -> None:
    settings = spark_settings(
        2,
        "k8s://https://10.96.0.1:443",
        "sluice orders",
        {"spark.executor.cores": "4"},
        cluster=kubernetes_conf(pod(), taskmanagers=2),
    )
    assert settings["spark.task.cpus"] == "4", "a TaskManager claims all cores of its executor"


def test_too_few_executors_for_the_taskmanagers_is_refused() -> None:
    with pytest.raises(SparkSetupError, match="cannot run 3 TaskManagers at once"):
        spark_settings(
            3,
            "k8s://https://10.96.0.1:443",
            "sluice orders",
            {"spark.executor.instances": "2"},
            cluster=kubernetes_conf(pod(), taskmanagers=3),
        )


@pytest.mark.parametrize(
    "override",
    [
        "spark.task.maxFailures=4",
        "spark.stage.maxConsecutiveAttempts=4",
        "spark.stage.maxAttempts=2",
        "spark.speculation=true",
        "spark.dynamicAllocation.enabled=true",
    ],
)
def test_settings_that_would_let_spark_retry_taskmanagers_are_refused(override: str) -> None:
    key, value = override.split("=")
    with pytest.raises(SparkSetupError, match="failover is the coordinator's"):
        spark_settings(2, "local[2]", "sluice x", {key: value})


def test_local_master_settings_stay_on_loopback_and_keep_user_java_options() -> None:
    settings = spark_settings(
        2, "local[2]", "sluice x", {"spark.driver.extraJavaOptions": "-Dfoo=1"}, log4j_file="/tmp/l.prop"
    )
    assert settings["spark.driver.host"] == settings["spark.driver.bindAddress"] == "127.0.0.1"
    options = settings["spark.driver.extraJavaOptions"]
    assert "-Dlog4j2.configurationFile=file:/tmp/l.prop" in options and options.endswith("-Dfoo=1")
    assert settings["spark.ui.enabled"] == "false" and settings["spark.python.worker.reuse"] == "false"


def test_executor_jvms_on_a_cluster_start_lean_and_keep_the_users_options() -> None:
    settings = spark_settings(
        1,
        "k8s://https://10.96.0.1:443",
        "sluice orders",
        {"spark.executor.extraJavaOptions": "-Dfoo=1"},
        cluster=kubernetes_conf(pod(), taskmanagers=1),
    )
    options = settings["spark.executor.extraJavaOptions"].split()
    assert options[:2] == ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"] and options[-1] == "-Dfoo=1"
    # A local master's executor is the driver's JVM: nothing to set.
    assert "spark.executor.extraJavaOptions" not in spark_settings(2, "local[2]", "sluice x")


@pytest.mark.parametrize(("master", "ok"), [("local[4]", True), ("local[4,2]", True), ("local[1]", False)])
def test_local_master_needs_a_slot_per_taskmanager(master: str, ok: bool) -> None:
    if ok:
        spark_settings(3, master, "sluice x")
    else:
        with pytest.raises(SparkSetupError, match=r"use --master local\[3\]"):
            spark_settings(3, master, "sluice x")


def test_spark_rpc_is_authenticated_on_kubernetes() -> None:
    settings = spark_settings(
        1,
        "k8s://https://10.96.0.1:443",
        "sluice orders",
        {
            "spark.authenticate.secret.file": "/var/run/sluice/spark/secret",
            "spark.network.crypto.enabled": "true",
        },
        cluster=kubernetes_conf(pod(), taskmanagers=1),
    )
    assert settings["spark.authenticate"] == "true"
    assert settings["spark.network.crypto.enabled"] == "true"
    # Spark refuses -Dspark.* in executor JVM options: the master an executor needs to read a secret
    # file comes from the image's entrypoint, not from here.
    assert "-Dspark" not in settings.get("spark.executor.extraJavaOptions", "")
    assert spark_settings(1, "k8s://https://10.96.0.1:443", "sluice orders")["spark.authenticate"] == "true"


def test_turning_spark_authentication_off_on_kubernetes_is_refused() -> None:
    with pytest.raises(SparkSetupError, match=r"spark.authenticate=false is not allowed: without it any pod"):
        spark_settings(
            1,
            "k8s://https://10.96.0.1:443",
            "sluice orders",
            {"spark.authenticate": "false"},
            cluster=kubernetes_conf(pod(), taskmanagers=1),
        )


def test_local_spark_authenticates_and_encrypts_its_rpc() -> None:
    local = spark_settings(2, "local[2]", "sluice local")
    assert local["spark.authenticate"] == "true" and local["spark.network.crypto.enabled"] == "true"
    # No secret is configured: Spark draws one per run for a local master, and it stays in the JVM.
    assert not [key for key in local if key.startswith("spark.authenticate.secret")]


def test_turning_spark_authentication_off_locally_is_refused() -> None:
    # Loopback is no boundary between the users of one machine: another user's process could fetch
    # the job's blocks.
    with pytest.raises(SparkSetupError, match=r"without it any process \(another user's, too\)"):
        spark_settings(1, "local[1]", "sluice local", {"spark.authenticate": "false"})
