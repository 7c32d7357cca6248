"""etcd, kube-apiserver and kube-controller-manager on loopback ports, for one test session."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from testkit._kube_pki import Pki, generate_pki
from testkit._kube_process import ManagedProcess
from testkit.ports import free_loopback_port

SERVICE_CIDR = "10.0.0.0/24"
_SERVICE_IP = "10.0.0.1"


def free_port() -> int:
    # Below the ephemeral range, checked free (testkit.ports): a port the kernel hands out for bind(0) can
    # be taken by any outgoing connection before the server binds it (seen: the operator's health port).
    return free_loopback_port()


def write_kubeconfig(path: Path, server: str, pki: Pki) -> None:
    # JSON is valid YAML, and every kubeconfig reader accepts it.
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "sluice-test", "cluster": {"server": server, "certificate-authority": str(pki.ca_cert)}}
        ],
        "users": [
            {
                "name": "admin",
                "user": {"client-certificate": str(pki.admin_cert), "client-key": str(pki.admin_key)},
            }
        ],
        "contexts": [{"name": "sluice-test", "context": {"cluster": "sluice-test", "user": "admin"}}],
        "current-context": "sluice-test",
    }
    path.write_text(json.dumps(config, indent=2))
    path.chmod(0o600)


class ControlPlaneError(RuntimeError):
    pass


class ControlPlane:
    def __init__(self, bin_dir: Path, workdir: Path) -> None:
        self.bin_dir, self.workdir = bin_dir, workdir
        self.processes: list[ManagedProcess] = []
        self.kubeconfig = workdir / "kubeconfig"
        self.server = ""
        self.etcd_data = _etcd_data_dir(workdir)
        self.pki: Pki | None = None

    def start(self, timeout: float = 120.0) -> None:
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout: float) -> None:
        pki = self.pki = generate_pki(self.workdir / "pki", _SERVICE_IP)
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        self.server = f"https://127.0.0.1:{api_port}"
        write_kubeconfig(self.kubeconfig, self.server, pki)

        etcd = self._spawn(
            "etcd",
            [
                "--name=sluice-test",
                f"--data-dir={self.etcd_data}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=sluice-test=http://127.0.0.1:{peer_port}",
                # Test data need not survive a crash; skipping fsync makes etcd several times faster.
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        deadline = time.monotonic() + timeout
        self._wait(etcd, deadline, lambda: _http_ok(f"{etcd_url}/health", None))

        apiserver = self._spawn(
            "kube-apiserver",
            [
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                # The reconciler would publish the advertise address as the `kubernetes` Service's
                # endpoint and refuses a loopback one; nothing routes Service traffic here anyway.
                "--endpoint-reconciler-type=none",
                f"--secure-port={api_port}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                f"--tls-cert-file={pki.server_cert}",
                f"--tls-private-key-file={pki.server_key}",
                f"--client-ca-file={pki.ca_cert}",
                "--authorization-mode=RBAC",
                "--allow-privileged=true",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki.service_account_pub}",
                f"--service-account-signing-key-file={pki.service_account_key}",
                "--profiling=false",
            ],
        )
        context = ssl.create_default_context(cafile=str(pki.ca_cert))
        context.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
        self._wait(apiserver, deadline, lambda: _http_ok(f"{self.server}/readyz", context))

        controller_manager = self._spawn(
            "kube-controller-manager",
            [
                f"--kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                # No serving endpoint: nothing scrapes it, and it would need its own port and certificates.
                "--secure-port=0",
                "--controllers=*",
                f"--service-account-private-key-file={pki.service_account_key}",
                f"--root-ca-file={pki.ca_cert}",
                f"--cluster-signing-cert-file={pki.ca_cert}",
                f"--cluster-signing-key-file={pki.ca_key}",
                "--use-service-account-credentials=false",
            ],
        )
        # The service-account controller creating "default" proves the controllers run (pods
        # cannot be created in a namespace before it exists).
        self._wait(
            controller_manager,
            deadline,
            lambda: self._kubectl_ok("get", "serviceaccount", "default", "--namespace", "default"),
        )

    def _spawn(self, name: str, args: list[str]) -> ManagedProcess:
        binary = self.bin_dir / name
        if not binary.exists():
            raise ControlPlaneError(f"{binary} does not exist; run scripts/k8s-binaries.sh")
        process = ManagedProcess(name, [str(binary), *args], self.workdir / f"{name}.log")
        self.processes.append(process)
        return process

    def _wait(self, process: ManagedProcess, deadline: float, ready: Callable[[], bool]) -> None:
        while not ready():
            if not process.running:
                raise ControlPlaneError(
                    f"{process.name} exited with {process.popen.returncode}; log {process.log_path}:\n"
                    f"{process.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"{process.name} not ready in time; log {process.log_path}:\n{process.log_tail()}"
                )
            time.sleep(0.2)

    def _kubectl_ok(self, *args: str) -> bool:
        result = subprocess.run(
            [str(self.bin_dir / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        return result.returncode == 0

    def health(self) -> str:
        """Whether each control-plane process still runs, with its log's tail: what a test prints when
        the API server stops answering, so the report says which part stalled or died."""
        parts = []
        for process in self.processes:
            state = "running" if process.running else f"exited with {process.popen.returncode}"
            parts.append(f"===== {process.name} ({state}), {process.log_path} =====\n{process.log_tail(15)}")
        return "\n".join(parts)

    def stop(self) -> None:
        # The session's data is thrown away, so a slow graceful shutdown buys nothing.
        for process in reversed(self.processes):
            process.stop(timeout=5)
        self.processes.clear()
        shutil.rmtree(self.etcd_data, ignore_errors=True)


def _etcd_data_dir(workdir: Path) -> Path:
    # etcd on memory, so a busy disk cannot hold up its writes: in one CI run the API server answered
    # "context deadline exceeded" for the rest of its session while the real node's image (gigabytes)
    # was built and imported beside it. The data is a few megabytes and is thrown away.
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return Path(tempfile.mkdtemp(prefix="sluice-etcd-", dir=shm))
    return workdir / "etcd"


def _http_ok(url: str, context: ssl.SSLContext | None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError, ssl.SSLError):
        return False
