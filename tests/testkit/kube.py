"""A real Kubernetes API for tests: fixtures `kube_env`, `kube_namespace` and `process_kubelet`.

`kube_env` (session) starts etcd, kube-apiserver and kube-controller-manager on loopback ports with
fresh certificates, installs the CRDs found in `crds/`, and stops everything at the end of the session.
With `SLUICE_TEST_KUBECONFIG` set it uses that cluster instead (a kind cluster, say) and starts nothing.
The binaries come from `scripts/k8s-binaries.sh` (KUBEBUILDER_ASSETS, or built once and cached).

`process_kubelet` (session) adds a node whose pods run as local processes (see kubelet/README.md);
on an existing cluster it is None, since real kubelets run the pods there.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

import pytest
import yaml

from testkit._kube_control_plane import ControlPlane
from testkit.kubelet import ProcessKubelet

REPO_ROOT = Path(__file__).resolve().parents[2]
CRDS_DIR = REPO_ROOT / "crds"
BINARIES_SCRIPT = REPO_ROOT / "scripts" / "k8s-binaries.sh"
EXTERNAL_KUBECONFIG_ENV = "SLUICE_TEST_KUBECONFIG"
T = TypeVar("T")


class KubeCommandError(subprocess.CalledProcessError):
    def __str__(self) -> str:
        return f"{' '.join(map(str, self.cmd))} exited with {self.returncode}:\n{self.stderr or self.stdout}"


def k8s_bin_dir() -> Path:
    """The directory of the pinned binaries; fails with instructions when they are not built yet."""
    result = subprocess.run([str(BINARIES_SCRIPT), "--check"], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"The Kubernetes test binaries are not available:\n{result.stderr.strip()}\n"
            f"Build them once with `{BINARIES_SCRIPT.relative_to(REPO_ROOT)}` (about 40 minutes cold on "
            "2 cores, cached afterwards), or set KUBEBUILDER_ASSETS to envtest binaries."
        )
    return Path(result.stdout.strip())


@dataclass
class KubeEnv:
    kubeconfig: Path
    server: str
    bin_dir: Path
    external: bool = False
    startup_seconds: float = 0.0
    helm_home: Path = field(default_factory=lambda: Path(tempfile.gettempdir()) / "sluice-helm")
    # The control plane's processes and log tails, for a failing test's report; empty when external.
    control_plane_health: Callable[[], str] = field(default=lambda: "", repr=False, compare=False)

    def _run(
        self,
        argv: Sequence[str],
        input: str | None,
        check: bool,
        timeout: float,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            list(argv), input=input, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
        if check and result.returncode != 0:
            raise KubeCommandError(result.returncode, argv, result.stdout, result.stderr)
        return result

    def kubectl(
        self,
        *args: str,
        namespace: str | None = None,
        input: str | None = None,
        check: bool = True,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        argv = [str(self.bin_dir / "kubectl"), "--kubeconfig", str(self.kubeconfig)]
        if namespace:
            argv += ["--namespace", namespace]
        return self._run([*argv, *args], input, check, timeout)

    def kubectl_json(self, *args: str, namespace: str | None = None) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json", namespace=namespace).stdout)

    def helm(
        self,
        *args: str,
        namespace: str | None = None,
        input: str | None = None,
        check: bool = True,
        timeout: float = 600.0,
    ) -> subprocess.CompletedProcess[str]:
        # Helm's caches and repositories stay out of the user's home directory.
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "HELM_CACHE_HOME": str(self.helm_home / "cache"),
            "HELM_CONFIG_HOME": str(self.helm_home / "config"),
            "HELM_DATA_HOME": str(self.helm_home / "data"),
        }
        argv = [str(self.bin_dir / "helm"), "--kubeconfig", str(self.kubeconfig)]
        if namespace:
            argv += ["--namespace", namespace]
        return self._run([*argv, *args], input, check, timeout, env)

    def apply_crds(self, directory: Path = CRDS_DIR, timeout: float = 60.0) -> list[str]:
        """Apply every YAML/JSON file in `directory` and wait until its CRDs are Established.

        Returns the CRD names; an empty or missing directory installs nothing.
        """
        files = sorted(p for p in directory.glob("*") if p.suffix in (".yaml", ".yml", ".json"))
        if not files:
            return []
        names = [
            doc["metadata"]["name"]
            for path in files
            for doc in yaml.safe_load_all(path.read_text())
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition"
        ]
        self.kubectl(
            "apply", "--server-side", "--force-conflicts", *(arg for p in files for arg in ("-f", str(p)))
        )
        if names:
            self.kubectl(
                "wait",
                "--for=condition=Established",
                f"--timeout={int(timeout)}s",
                *(f"crd/{name}" for name in names),
                timeout=timeout + 10,
            )
        return names

    def wait_for(
        self,
        what: str,
        condition: Any,
        *,
        namespace: str | None = None,
        timeout: float = 60.0,
        interval: float = 0.3,
    ) -> Any:
        """Poll `kubectl get <what> -o json` until `condition(obj)` is truthy; returns the object."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            result = self.kubectl("get", *what.split(), "-o", "json", namespace=namespace, check=False)
            if result.returncode == 0:
                last = json.loads(result.stdout)
                if condition(last):
                    return last
            time.sleep(interval)
        raise TimeoutError(
            f"{what} did not reach the expected state in {timeout}s; last seen:\n"
            f"{json.dumps(last, indent=1)[-3000:]}"
        )


def _external_env(kubeconfig: Path, workdir: Path) -> KubeEnv:
    if not kubeconfig.is_file():
        raise RuntimeError(f"{EXTERNAL_KUBECONFIG_ENV}={kubeconfig} is not a file; point it at a kubeconfig")
    tools = {name: shutil.which(name) for name in ("kubectl", "helm")}
    if all(tools.values()):
        bin_dir = workdir / "bin"
        bin_dir.mkdir()
        for name, path in tools.items():
            (bin_dir / name).symlink_to(str(path))
    else:
        bin_dir = k8s_bin_dir()
    env = KubeEnv(
        kubeconfig=kubeconfig, server="", bin_dir=bin_dir, external=True, helm_home=workdir / "helm"
    )
    env.server = env.kubectl(
        "config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}"
    ).stdout
    return env


class _PerSession(Generic[T]):
    """One instance per test session, however many conftest files import the fixture.

    Each import registers a fixture definition of its own, and pytest runs a session fixture once per
    definition: without this, two folders would start two control planes.
    """

    def __init__(self) -> None:
        self._value: T | None = None
        self._stop: Callable[[], None] = lambda: None
        self._users = 0

    @contextlib.contextmanager
    def use(self, start: Callable[[], tuple[T, Callable[[], None]]]) -> Iterator[T]:
        if self._users == 0:
            self._value, self._stop = start()
        self._users += 1
        try:
            yield cast(T, self._value)
        finally:
            self._users -= 1
            if self._users == 0:
                self._value = None
                self._stop()


_KUBE_ENV: _PerSession[KubeEnv] = _PerSession()
_KUBELET: _PerSession[ProcessKubelet | None] = _PerSession()


def _start_kube_env(workdir: Path) -> tuple[KubeEnv, Callable[[], None]]:
    external = os.environ.get(EXTERNAL_KUBECONFIG_ENV)
    if external:
        env = _external_env(Path(external), workdir)
        env.apply_crds()
        return env, lambda: None
    control_plane = ControlPlane(k8s_bin_dir(), workdir)
    started = time.monotonic()
    control_plane.start()
    try:
        env = KubeEnv(
            control_plane.kubeconfig,
            control_plane.server,
            control_plane.bin_dir,
            startup_seconds=time.monotonic() - started,
            helm_home=control_plane.workdir / "helm",
            control_plane_health=control_plane.health,
        )
        env.apply_crds()
    except BaseException:
        control_plane.stop()
        raise
    return env, control_plane.stop


@pytest.fixture(scope="session")
def kube_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeEnv]:
    with _KUBE_ENV.use(lambda: _start_kube_env(tmp_path_factory.mktemp("kube"))) as env:
        yield env


def namespace_for(test_name: str) -> str:
    stem = re.sub(r"[^a-z0-9]+", "-", test_name.lower()).strip("-")[:48].strip("-")
    return f"{stem or 'test'}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def kube_namespace(kube_env: KubeEnv, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards (without waiting for its contents to go)."""
    name = namespace_for(request.node.name)
    kube_env.kubectl("create", "namespace", name)
    # The ServiceAccount admission plugin rejects pods until the controller has created "default".
    kube_env.wait_for("serviceaccount default", bool, namespace=name, timeout=30)
    yield name
    kube_env.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)


def _start_kubelet(kube_env: KubeEnv, state_dir: Path) -> tuple[ProcessKubelet | None, Callable[[], None]]:
    if kube_env.external:
        return None, lambda: None  # the cluster's own kubelets run the pods
    kubelet = ProcessKubelet.start(kube_env.kubeconfig, state_dir)
    return kubelet, kubelet.stop


@pytest.fixture(scope="session")
def process_kubelet(
    kube_env: KubeEnv, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProcessKubelet | None]:
    with _KUBELET.use(lambda: _start_kubelet(kube_env, tmp_path_factory.mktemp("kubelet"))) as kubelet:
        yield kubelet


_STREAMJOB = """\
apiVersion: sluice.dev/v1alpha1
kind: StreamJob
metadata:
  name: {name}
spec:
  image: sluice:dev
  pipeline:
    file: examples/unbounded_counts.py
    args: {{out: "$(SLUICE_STORAGE)/output"}}
  parallelism: {parallelism}
  taskManagers: {{replicas: {parallelism}}}
"""


def streamjob_manifest(name: str, *, parallelism: int = 2, extra: str = "") -> str:
    """A StreamJob running examples/unbounded_counts.py into the operator's storage; `extra` is more of
    its spec (YAML at the spec's indentation, or dedented)."""
    spec = textwrap.indent(textwrap.dedent(extra), "  ")
    return _STREAMJOB.format(name=name, parallelism=parallelism) + spec
