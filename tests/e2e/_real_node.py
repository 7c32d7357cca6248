"""A real one-node cluster for end-to-end tests: containers, Services, DNS and NetworkPolicies.

`scripts/k8s-cluster.sh up` starts it (every component inside a network namespace of its own, see the
script); `scripts/build-image.sh --local-base --archive` builds the image from the Dockerfile on a base
made from Debian packages, and the cluster's containerd imports it as `sluice:dev`, the name the
examples and the chart use. Both are cached outside the clone, so a warm session reuses them.

Object storage is a moto S3 server inside the node's network namespace, on the node's address: pods
reach it as they would a bucket outside the cluster, and so does this machine, over the veth pair that
joins it to the namespace. No address outside this machine is ever used.

The cluster stays up for the whole session and is taken down at its end, unless it was already up
when the session began (`scripts/k8s-cluster.sh up` by hand): then it is left as found. Under
`scripts/test.sh` a process of the run's own prepares the node beside the earlier tiers and holds it
until the last tier has ended (`_node_session.py`); the fixture then only waits for it.

The node is one per machine (its state directory, network namespace and addresses are fixed), so a
session holds a lease on it, an exclusive lock, from before `up` until after `down`. A second test run
on the machine (another clone, or a run left going while CI starts) waits for it: without the lease the
first run's `down` took the node away under the second one's tests, and every one of them failed with
an operator that never became ready.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from e2e._chart_operator import ChartOperator
from e2e._cluster import E2ECluster
from e2e._storage import E2EStorage
from testkit.kube import REPO_ROOT, KubeEnv, k8s_bin_dir

CLUSTER_SCRIPT = REPO_ROOT / "scripts" / "k8s-cluster.sh"
IMAGE_SCRIPT = REPO_ROOT / "scripts" / "build-image.sh"
IMAGE = "sluice:dev"
RELEASE = "sluice"
"""The prefix of each test's Helm release: `sluice-<namespace's suffix>`. The chart's cluster-scoped
objects (the CRD ClusterRole and its binding) are named after the release, so a release that outlives
its test (a module's, while pytest-xdist runs another module's test on the same worker; or one whose
uninstall failed) cannot block the next install."""
NODE_IP = "10.250.0.2"
S3_PORT = 9000
"""A port of the node's network namespace, where nothing else listens."""


@dataclass
class RealNode:
    kube: KubeEnv
    netns: str
    s3_endpoint: str
    setup_seconds: float

    def in_node(self, *argv: str) -> list[str]:
        """`argv` run in the node's network namespace (where the pods' addresses are routed)."""
        return ["nsenter", f"--net=/run/netns/{self.netns}", "--", *argv]

    def restart(self, *components: str) -> None:
        """Restart node components (`kubelet`, `containerd`, `kube-apiserver`, ...) as a service manager
        would: SIGTERM, then the same command again; everything else, containers included, runs on."""
        _run([str(CLUSTER_SCRIPT), "restart", *components], f"restarting {components}", print, timeout=300)


def _run(argv: list[str], what: str, say: Callable[[str], None], timeout: float) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{what} failed ({result.returncode}):\n{result.stderr[-4000:]}")
    # The scripts print build and start-up times and the image's size; pass them on to the output.
    for line in result.stderr.splitlines():
        if line.startswith(("cluster up time:", "image build time:", "image size:")):
            say(line)
    return result.stdout.strip()


def _start_s3(node_netns: str, log: Path) -> subprocess.Popen[bytes]:
    python = REPO_ROOT / ".venv" / "bin" / "python"
    argv = ["nsenter", f"--net=/run/netns/{node_netns}", "--", str(python), "-m", "moto.server"]
    with log.open("wb") as out:
        server = subprocess.Popen(
            [*argv, "--host", NODE_IP, "--port", str(S3_PORT)], stdout=out, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://{NODE_IP}:{S3_PORT}/moto-api/", timeout=2).close()
            return server
        except OSError:
            if server.poll() is not None:
                break
            time.sleep(0.3)
    server.kill()
    raise RuntimeError(f"the S3 server in the node's network namespace did not start:\n{log.read_text()}")


LEASE_WAIT_S = 3600.0
"""How long a session waits for another to give the node back: longer than the real-node tests of a
whole run take."""


def lease_path() -> Path:
    """The lock file beside the cluster's state directory: `down` removes the directory, not this."""
    state = Path(os.environ.get("SLUICE_CLUSTER_DIR", "/var/lib/sluice-cluster"))
    return state.with_name(state.name + ".lease")


@contextlib.contextmanager
def node_lease(path: Path, wait_s: float = LEASE_WAIT_S, poll_s: float = 2.0) -> Iterator[None]:
    """Holds the machine's real node for this process: waits while another holds it, says who, and
    fails after `wait_s` with what to do. The kernel drops the lock when its holder dies, killed or not."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + wait_s
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "unknown"
                if time.monotonic() >= deadline:
                    raise RuntimeError(
                        f"the real node is still in use by another test run ({holder}) after {wait_s:.0f} s; "
                        f"let it finish or stop it (its lock: {path})"
                    ) from None
                if not told:
                    print(f"waiting for the real node: another test run holds it ({holder})", flush=True)
                    told = True
                time.sleep(poll_s)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} in {os.getcwd()}".encode(), 0)
        yield
    finally:
        os.close(fd)  # also releases the lock


@dataclass(frozen=True)
class PreparedNode:
    """A node that is up with the image imported: what the tests need to reach it."""

    kubeconfig: Path
    netns: str

    def to_json(self) -> dict[str, str]:
        return {"kubeconfig": str(self.kubeconfig), "netns": self.netns}

    @classmethod
    def from_json(cls, body: dict[str, str]) -> PreparedNode:
        return cls(Path(body["kubeconfig"]), body["netns"])


def node_is_up() -> bool:
    return subprocess.run([str(CLUSTER_SCRIPT), "status"], check=False).returncode == 0


def prepare_node(say: Callable[[str], None] = print) -> PreparedNode:
    """Builds the image (or finds it built), brings the node up (or finds it up) and imports the image
    (once per archive). The caller holds the lease. The image first: its cache key is a hash of the
    checkout's files, taken before any test of the run can have written one."""
    archive = _run(
        [str(IMAGE_SCRIPT), "--builder", "buildah", "--local-base", "--tag", IMAGE, "--archive"],
        "scripts/build-image.sh",
        say,
        timeout=3600,
    )
    kubeconfig = Path(_run([str(CLUSTER_SCRIPT), "up"], "scripts/k8s-cluster.sh up", say, timeout=3600))
    netns = _run([str(CLUSTER_SCRIPT), "netns"], "scripts/k8s-cluster.sh netns", say, timeout=10)
    _run([str(CLUSTER_SCRIPT), "load", archive], "scripts/k8s-cluster.sh load", say, timeout=600)
    return PreparedNode(kubeconfig, netns)


def take_down() -> None:
    """`scripts/k8s-cluster.sh down`, unless SLUICE_KEEP_CLUSTER=1 asks to keep the node."""
    if os.environ.get("SLUICE_KEEP_CLUSTER") != "1":
        subprocess.run([str(CLUSTER_SCRIPT), "down"], check=False, timeout=300)


@pytest.fixture(scope="session")
def real_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealNode]:
    if os.geteuid() != 0:
        raise RuntimeError(
            "the real-node tests need root (a network namespace, containerd, mounts, cgroups); "
            "run them as root, or deselect them with -k 'not real_node'"
        )
    started = time.monotonic()
    session = os.environ.get("SLUICE_REAL_NODE_SESSION")
    if session:
        # The run's own session process holds the lease and prepared the node beside the earlier
        # tiers; it takes the node down after the last tier (tests/e2e/_node_session.py).
        from e2e._node_session import wait_prepared

        prepared = wait_prepared(Path(session), int(os.environ["SLUICE_REAL_NODE_SESSION_PID"]))
        yield from _use_node(prepared, tmp_path_factory, started)
        return
    with node_lease(lease_path()):
        was_up = node_is_up()
        try:
            yield from _use_node(prepare_node(), tmp_path_factory, started)
        finally:
            if not was_up:
                take_down()


def _use_node(
    prepared: PreparedNode, tmp_path_factory: pytest.TempPathFactory, started: float
) -> Iterator[RealNode]:
    """The node as the tests see it: an S3 server in its network namespace and the CRDs applied."""
    workdir = tmp_path_factory.mktemp("real-node")
    server = _start_s3(prepared.netns, workdir / "moto.log")
    try:
        kube = KubeEnv(
            kubeconfig=prepared.kubeconfig,
            server=f"https://{NODE_IP}:6443",
            bin_dir=k8s_bin_dir(),
            external=True,
            helm_home=workdir / "helm",
        )
        kube.apply_crds()
        node = RealNode(kube, prepared.netns, f"http://{NODE_IP}:{S3_PORT}", time.monotonic() - started)
        print(f"real node set-up time: {node.setup_seconds:.0f} s")
        yield node
    finally:
        server.terminate()
        server.wait(timeout=30)


@contextlib.contextmanager
def restricted_release(node: RealNode) -> Iterator[E2ECluster]:
    """The chart installed into a fresh namespace that enforces the `restricted` Pod Security level, with
    a bucket of its own; the operator is not started (`.operator.start()` runs `helm install`)."""
    kube = node.kube
    suffix = uuid.uuid4().hex[:6]
    namespace = f"node-{suffix}"
    kube.kubectl("create", "namespace", namespace)
    kube.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    storage = E2EStorage(node.s3_endpoint, f"node-{uuid.uuid4().hex[:12]}")
    storage.filesystem().mkdir(storage.bucket)
    chart = ChartOperator(kube, storage, namespace, f"{RELEASE}-{suffix}", cluster_wide=False)
    cluster = E2ECluster(kube, None, chart, storage, namespace)
    try:
        yield cluster
    finally:
        cluster.kubectl("delete", "streamjobs", "--all", "--timeout=90s", check=False)
        uninstall = chart.uninstall()
        kube.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        _no_cluster_objects_left(kube, chart.release, uninstall)


def _no_cluster_objects_left(
    kube: KubeEnv, release: str, uninstall: subprocess.CompletedProcess[str]
) -> None:
    """Fails the test whose release `helm uninstall` did not take away entirely (with what helm said),
    after deleting what is left, so that the one test reports it and the next ones start clean."""
    selector = f"app.kubernetes.io/instance={release}"
    left = kube.kubectl("get", "clusterroles,clusterrolebindings", "-l", selector, "-o", "name", check=False)
    names = left.stdout.split()
    if names:
        kube.kubectl("delete", *names, "--ignore-not-found", check=False)
        raise RuntimeError(
            f"helm uninstall {release} left {names} (exit {uninstall.returncode}):\n"
            f"{uninstall.stdout}{uninstall.stderr}"
        )
