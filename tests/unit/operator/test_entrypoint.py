"""docker/entrypoint.sh on the host: each mode builds the command the image would run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "docker" / "entrypoint.sh"

EXECUTOR_ENV = {
    "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@10.1.0.4:7078",
    "SPARK_EXECUTOR_ID": "3",
    "SPARK_EXECUTOR_CORES": "2",
    "SPARK_APPLICATION_ID": "spark-application-17",
    "SPARK_EXECUTOR_POD_IP": "10.1.0.9",
    "SPARK_EXECUTOR_POD_NAME": "counts-taskmanager-3",
    "SPARK_EXECUTOR_MEMORY": "1024m",
    "SPARK_RESOURCE_PROFILE_ID": "0",
    "SPARK_JAVA_OPT_10": "-Dten=10",
    "SPARK_JAVA_OPT_0": "-Dzero=0",
    "SPARK_JAVA_OPT_2": "-Dtwo=2",
}


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The entrypoint in dry-run mode: it prints the command it would exec."""
    return _invoke(args, {**env, "SLUICE_ENTRYPOINT_DRY_RUN": "1"})


def _run_for_real(*args: str) -> subprocess.CompletedProcess[str]:
    return _invoke(args, {})


def _invoke(args: tuple[str, ...], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    prefixes = ("SPARK_", "SLUICE_", "PYSPARK_", "KUBERNETES_SERVICE_")
    base = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    base.update({"SLUICE_PYTHON": sys.executable, **env})
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, env=base, timeout=60, check=False
    )


def test_operator_mode_runs_the_operator() -> None:
    result = _run_for_real("operator", "--help")
    assert result.returncode == 0, result.stderr
    assert "usage: sluice-operator" in result.stdout


def test_coordinator_mode_runs_sluice_run_from_sluice_home(tmp_path: Path) -> None:
    result = _run("coordinator", "examples/unbounded_counts.py", "--job-id", "abc", SLUICE_HOME=str(tmp_path))
    assert result.returncode == 0, result.stderr
    argv = result.stdout.splitlines()
    assert argv[0] == sys.executable
    assert argv[1] == "-c"
    assert "from sluice.cli import main" in argv[2]
    assert argv[3:] == ["run", "examples/unbounded_counts.py", "--job-id", "abc"]


def test_coordinator_mode_without_arguments_says_what_is_missing() -> None:
    result = _run("coordinator")
    assert result.returncode == 2
    assert "sluice run" in result.stderr


def test_executor_mode_follows_sparks_executor_contract(tmp_path: Path) -> None:
    result = _run("executor", SPARK_HOME=str(tmp_path), JAVA_HOME="/jvm", **EXECUTOR_ENV)
    assert result.returncode == 0, result.stderr
    argv = result.stdout.splitlines()
    assert argv[0] == "/jvm/bin/java"
    assert argv[1:4] == ["-Dzero=0", "-Dtwo=2", "-Dten=10"]  # numeric order of SPARK_JAVA_OPT_<n>
    assert argv[4:6] == ["-Xms1024m", "-Xmx1024m"]
    assert argv[6:8] == ["-cp", f"{tmp_path}/conf:{tmp_path}/jars/*"]
    assert argv[8] == "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
    flags = dict(zip(argv[9::2], argv[10::2], strict=True))
    assert flags == {
        "--driver-url": EXECUTOR_ENV["SPARK_DRIVER_URL"],
        "--executor-id": "3",
        "--cores": "2",
        "--app-id": "spark-application-17",
        "--hostname": "10.1.0.9",
        "--resourceProfileId": "0",
        "--podName": "counts-taskmanager-3",
    }


@pytest.mark.parametrize(
    ("host", "master"),
    [("10.96.0.1", "k8s://https://10.96.0.1:443"), ("fd00::1", "k8s://https://[fd00::1]:443")],
)
def test_executors_in_a_pod_know_the_master_before_fetching_the_drivers_settings(
    tmp_path: Path, host: str, master: str
) -> None:
    # Without it an executor cannot read its mounted Spark secret file, so it cannot authenticate.
    env = {**EXECUTOR_ENV, "KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": "443"}
    result = _run("executor", SPARK_HOME=str(tmp_path), JAVA_HOME="/jvm", **env)
    assert result.returncode == 0, result.stderr
    argv = result.stdout.splitlines()
    assert argv[1:5] == ["-Dzero=0", "-Dtwo=2", "-Dten=10", f"-Dspark.master={master}"]
    assert argv.index("org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend") > 4


def test_executor_classpath_defaults_to_the_installed_pyspark() -> None:
    import pyspark

    result = _run("executor", SPARK_CONF_DIR="/etc/spark", **EXECUTOR_ENV)
    assert result.returncode == 0, result.stderr
    home = os.path.dirname(pyspark.__file__)
    assert f"/etc/spark:{home}/jars/*" in result.stdout.splitlines()


def test_executor_mode_outside_spark_explains_itself() -> None:
    result = _run("executor")
    assert result.returncode == 2
    assert "missing SPARK_DRIVER_URL" in result.stderr


def test_other_commands_pass_through() -> None:
    result = _run_for_real("sh", "-c", "echo $((6 * 7))")
    assert (result.returncode, result.stdout) == (0, "42\n")


def test_help() -> None:
    result = _run_for_real("--help")
    assert result.returncode == 0
    assert "operator" in result.stdout and "executor" in result.stdout


def test_defaults_find_the_checkout_and_its_venv() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "SLUICE_", "PYSPARK_"))}
    env["SLUICE_ENTRYPOINT_DRY_RUN"] = "1"
    result = subprocess.run(
        [str(SCRIPT), "coordinator", "examples/w1_window_counts.py"],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == str(ROOT / ".venv" / "bin" / "python")
