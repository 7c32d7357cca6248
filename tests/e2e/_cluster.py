"""One test's view of the cluster: its namespace, kubectl, the jobs' pods and coordinators, diagnostics.

Everything that differs between the process kubelet and a real cluster (kind) is here: how to reach a
coordinator's REST API (the pod IP directly, or the API server's pod proxy), how to signal a process of
a pod (this machine's PID, or `kubectl exec`), and where container logs come from.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from e2e._operator import Operator
from e2e._storage import E2EStorage
from testkit.kube import KubeEnv
from testkit.kubelet import ProcessKubelet

T = TypeVar("T")
# The coordinators' REST port on a real cluster (the operator's default). Under the process kubelet each
# operator gives its coordinators a port of their own: `E2ECluster.rest_port` reads it from the pod.
REST_PORT = 8081
# A GET of the coordinator's REST API from inside its pod, with the token mounted there (port, path).
_IN_POD_GET = (
    "/opt/sluice/.venv/bin/python",
    "-c",
    "import sys, urllib.request as u; "
    "t = open('/var/run/sluice/rest/token').read().strip(); "
    "r = u.Request(f'http://127.0.0.1:{sys.argv[1]}' + sys.argv[2], "
    "headers={'Authorization': 'Bearer ' + t}); "
    "sys.stdout.write(u.urlopen(r, timeout=10).read().decode())",
)
JOB_LABEL = "sluice.dev/job"
ROLE_LABEL = "sluice.dev/role"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "k8s"


class E2EFailure(AssertionError):
    pass


def rest_port_of(coordinator_pod: dict[str, Any]) -> int:
    """The coordinator container's port named `rest`, as the operator made the pod."""
    for container in coordinator_pod["spec"]["containers"]:
        for port in container.get("ports") or []:
            if port.get("name") == "rest":
                return int(port["containerPort"])
    raise E2EFailure(f"pod {coordinator_pod['metadata']['name']} has no port named rest")


@dataclass
class E2ECluster:
    kube: KubeEnv
    kubelet: ProcessKubelet | None
    operator: Operator
    storage: E2EStorage
    namespace: str

    # --- kubectl ---------------------------------------------------------------------------------------

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        return self.kube.kubectl(*args, namespace=self.namespace, check=check, input=input, timeout=timeout)

    def apply(self, manifest: Path | str) -> str:
        """`kubectl apply -f` of a file (examples/k8s/, unchanged) or of YAML text; kubectl's output."""
        if isinstance(manifest, Path):
            return str(self.kubectl("apply", "-f", str(manifest)).stdout)
        return str(self.kubectl("apply", "-f", "-", input=manifest).stdout)

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        result = self.kubectl("get", kind, name, "-o", "json", check=False)
        return json.loads(result.stdout) if result.returncode == 0 else None

    def items(self, kind: str, selector: str | None = None) -> list[dict[str, Any]]:
        args = ["get", kind, "-o", "json"] + (["-l", selector] if selector else [])
        return list(json.loads(self.kubectl(*args).stdout)["items"])

    def set_state(self, job: str, state: str) -> None:
        self.kubectl("patch", "streamjob", job, "--type=merge", "-p", json.dumps({"spec": {"state": state}}))

    def job_pods(self, job: str) -> list[dict[str, Any]]:
        return self.items("pods", f"{JOB_LABEL}={job}")

    def taskmanager_pods(self, job: str) -> list[dict[str, Any]]:
        return self.items("pods", f"{JOB_LABEL}={job},{ROLE_LABEL}=taskmanager")

    # --- waiting ---------------------------------------------------------------------------------------

    def wait(
        self, what: str, probe: Callable[[], T | None], timeout: float = 120.0, interval: float = 0.5
    ) -> T:
        """Poll `probe` until it returns something other than None or False; fail with diagnostics."""
        deadline = time.monotonic() + timeout
        last: object = None
        while True:
            try:
                value = probe()
            except E2EFailure:
                raise  # the probe saw a state that cannot turn good any more
            except Exception as error:  # a transient kubectl or HTTP error: keep polling, show it if it lasts
                value, last = None, error
            if value is not None and value is not False:
                return value
            if time.monotonic() > deadline:
                raise E2EFailure(
                    f"{what}: not within {timeout:.0f}s (last error: {last!r})\n{self.diagnostics()}"
                )
            time.sleep(interval)

    def wait_streamjob(
        self, name: str, what: str, condition: Callable[[dict[str, Any]], bool], timeout: float = 180.0
    ) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            job = self.get("streamjob", name)
            return job if job is not None and condition(job) else None

        return self.wait(f"StreamJob {name}: {what}", probe, timeout)

    def wait_lifecycle(self, name: str, state: str, timeout: float = 180.0) -> dict[str, Any]:
        def reached(job: dict[str, Any]) -> bool:
            status = job.get("status") or {}
            if status.get("lifecycleState") == "Failed" != state:
                raise E2EFailure(f"StreamJob {name} Failed: {status.get('error')}\n{self.diagnostics()}")
            return status.get("lifecycleState") == state

        return self.wait_streamjob(name, f"lifecycleState {state}", reached, timeout)

    def wait_savepoint(self, name: str, state: str, timeout: float = 180.0) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            savepoint = self.get("savepoint", name)
            found = (savepoint or {}).get("status", {}).get("state")
            if found in ("Failed", "Abandoned") and state not in ("Failed", "Abandoned"):
                raise E2EFailure(
                    f"Savepoint {name} is {found}, expected {state}: "
                    f"{json.dumps(savepoint['status'])}\n{self.diagnostics()}"  # type: ignore[index]
                )
            return savepoint if found == state else None

        return self.wait(f"Savepoint {name}: state {state}", probe, timeout)

    def wait_checkpoints_after(self, job: str, checkpoint_id: int, timeout: float = 120.0) -> int:
        """Wait until the job's status shows a checkpoint newer than `checkpoint_id`; returns its id."""
        found = self.wait_streamjob(
            job,
            f"a checkpoint after {checkpoint_id}",
            lambda sj: (
                int(((sj.get("status") or {}).get("lastCheckpoint") or {}).get("id") or 0) > checkpoint_id
            ),
            timeout,
        )
        return int(found["status"]["lastCheckpoint"]["id"])

    def wait_running_with_checkpoint(self, job: str, timeout: float = 240.0) -> dict[str, Any]:
        """Running, every subtask running, and at least one checkpoint completed by this run."""

        def ready(sj: dict[str, Any]) -> bool:
            status = sj.get("status") or {}
            run = status.get("job") or {}
            checkpoint = status.get("lastCheckpoint") or {}
            subtasks = run.get("subtasks") or {}
            return (
                status.get("lifecycleState") == "Running"
                and run.get("state") == "RUNNING"
                and subtasks.get("running", 0) > 0
                and subtasks.get("running") == subtasks.get("total")
                and str(checkpoint.get("path", "")).find(str(run.get("id"))) >= 0
            )

        return self.wait_streamjob(job, "Running with a checkpoint of the current run", ready, timeout)

    def wait_pods_gone(self, job: str, timeout: float = 120.0) -> None:
        self.wait(f"every pod of job {job} gone", lambda: not self.job_pods(job), timeout)

    # --- the coordinator and the TaskManager processes ----------------------------------------------------

    def coordinator_pod(self, job: str) -> dict[str, Any]:
        pod = self.get("pod", f"{job}-coordinator")
        if pod is None:
            raise E2EFailure(f"job {job} has no coordinator pod\n{self.diagnostics()}")
        return pod

    def coordinator(self, job: str, path: str) -> Any:
        """GET `path` of the coordinator's REST API (docs/reference/rest-api.md), with the job's token.

        Every call but health needs the token the operator keeps in the job's Secret. On a real cluster
        the call is made inside the coordinator's pod, on loopback: the API server's pod proxy would not
        pass an Authorization header on, and the job's NetworkPolicy lets only the operator in.
        """
        pod = self.coordinator_pod(job)
        port = str(rest_port_of(pod))
        if self.kubelet is not None:
            request = urllib.request.Request(
                f"http://{pod['status']['podIP']}:{port}{path}",
                headers={"Authorization": f"Bearer {self.rest_token(job)}"},
            )
            with urllib.request.urlopen(request, timeout=10) as answer:
                return json.loads(answer.read())
        name = pod["metadata"]["name"]
        in_pod = self.kubectl("exec", name, "-c", "coordinator", "--", *_IN_POD_GET, port, path)
        return json.loads(in_pod.stdout)

    def rest_port(self, job: str) -> int:
        """The port the job's coordinator serves its REST API on, in its pod."""
        return rest_port_of(self.coordinator_pod(job))

    def rest_token(self, job: str) -> str:
        secret = self.get("secret", f"{job}-auth")
        if secret is None:
            raise E2EFailure(f"job {job} has no Secret {job}-auth\n{self.diagnostics()}")
        return base64.b64decode(secret["data"]["rest-token"]).decode()

    def wait_restarted(self, job: str, restarts: int, old_pids: set[int], timeout: float = 180) -> Any:
        """Wait until the run (`GET /v1/job`) has restarted `restarts` times and runs every subtask on
        TaskManagers none of which has a PID of `old_pids`; returns that answer."""

        def restarted() -> Any:
            run = self.coordinator(job, "/v1/job")
            pids = {tm["pid"] for tm in run["taskManagers"]}
            ok = (
                run["state"] == "RUNNING"
                and run["restarts"] >= restarts
                and run["subtasks"]["running"] == run["subtasks"]["total"]
                and len(pids) == len(run["taskManagers"]) > 0
                and not pids & old_pids
            )
            return run if ok else None

        what = f"job {job} restarted ({restarts} restart(s)) with new TaskManagers"
        return self.wait(what, restarted, timeout)

    def taskmanager_pod_of(self, job: str, host: str) -> str:
        """The executor pod whose IP a TaskManager reports as its host."""
        for pod in self.taskmanager_pods(job):
            if pod.get("status", {}).get("podIP") == host:
                return str(pod["metadata"]["name"])
        raise E2EFailure(f"no TaskManager pod of {job} has IP {host}\n{self.diagnostics()}")

    def signal_process(self, pod: str, pid: int, signum: int) -> None:
        """Signal a process of a pod; `pid` as the pod sees it (the REST API's taskManagers[].pid)."""
        if self.kubelet is not None:
            os.kill(pid, signum)  # the process kubelet's pods share this machine's PID namespace
            return
        self.kubectl("exec", pod, "--", "kill", f"-{signal.Signals(signum).name[3:]}", str(pid))

    def kill_executor_jvm(self, pod: str) -> None:
        """SIGKILL the Spark executor JVM of a TaskManager pod: the pod's container dies with it."""
        if self.kubelet is not None:
            status = self.get("pod", pod) or {}
            (container,) = status["status"]["containerStatuses"]
            pid = int(container["containerID"].removeprefix("process://"))
            os.kill(pid, signal.SIGKILL)
            return
        self.kubectl("exec", pod, "--", "sh", "-c", "kill -9 $(pgrep -f KubernetesExecutorBackend)")

    # --- clean-up --------------------------------------------------------------------------------------

    def remove_jobs_and_pods(self) -> None:
        """Delete the namespace's StreamJobs (through the operator's finalizer) and every pod left.

        Needs a running operator for the finalizers; if the deletion does not finish, the finalizers are
        removed by hand, or the namespace would never go away. Pods must be gone before the next test:
        under the process kubelet the coordinators of one operator all bind its REST port on 0.0.0.0,
        a port of this machine.
        """
        deleted = self.kubectl("delete", "streamjobs", "--all", "--timeout=90s", check=False)
        if deleted.returncode != 0:
            for job in self.items("streamjobs"):
                self.kubectl(
                    "patch",
                    "streamjob",
                    job["metadata"]["name"],
                    "--type=merge",
                    "-p",
                    '{"metadata":{"finalizers":null}}',
                    check=False,
                )
        self.kubectl("delete", "pods", "--all", "--grace-period=5", "--timeout=60s", check=False)

    # --- diagnostics -----------------------------------------------------------------------------------

    def diagnostics(self) -> str:
        """What a failing test prints: the operator's log, objects, events and every container's log."""
        parts = [f"===== operator log (tail) =====\n{self.operator.logs(60)}"]
        for title, args in (
            ("objects", ["get", "streamjobs,savepoints,pods,services,configmaps", "-o", "wide"]),
            ("events", ["get", "events", "--sort-by=.lastTimestamp"]),
        ):
            try:
                result = self.kubectl(*args, check=False, timeout=30)
            except subprocess.TimeoutExpired:
                parts.append(f"===== {title}: the API server did not answer in 30 s =====")
                parts.append(self.kube.control_plane_health())
                return "\n".join(parts)
            text = (result.stdout or result.stderr).splitlines()
            parts.append(f"===== {title} =====\n" + "\n".join(text[-40:]))
        for job in self.items("streamjobs") if self._reachable() else []:
            status = json.dumps(job.get("status"), indent=1)
            parts.append(f"===== StreamJob {job['metadata']['name']} status =====\n{status[-3000:]}")
        parts.extend(self._container_logs())
        return "\n".join(parts)

    def _reachable(self) -> bool:
        return self.kubectl("get", "namespace", self.namespace, check=False).returncode == 0

    def _container_logs(self, lines: int = 30) -> list[str]:
        parts = []
        if self.kubelet is not None:
            pods = sorted(
                (self.kubelet.state_dir / "pods").glob(f"{self.namespace}_*"), key=lambda p: p.stat().st_mtime
            )
            for pod_dir in pods:
                for log in sorted((pod_dir / "logs").glob("*/*.log")):
                    text = log.read_text(errors="replace").splitlines()[-lines:]
                    name = pod_dir.name.split("_")[1]
                    parts.append(f"===== {name}/{log.parent.name} run {log.stem} =====\n" + "\n".join(text))
            return parts
        for pod in self.items("pods") if self._reachable() else []:
            name = pod["metadata"]["name"]
            result = self.kubectl("logs", name, "--all-containers", f"--tail={lines}", check=False)
            parts.append(f"===== {name} =====\n{result.stdout or result.stderr}")
        return parts
