"""The process kubelet: pods of a real API server run as local processes (see README.md).

`ProcessKubelet.start` runs it as a subprocess (`python -m testkit.kubelet`) next to the test session.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from testkit._kube_process import ManagedProcess

from ._host_paths import refuse_hidden_paths
from ._images import ENTRYPOINT_SCRIPT, SHELL_IMAGE, ImageSpec, default_images, images_to_json
from ._ips import claim_pod_cidr, release_pod_cidr

__all__ = ["ENTRYPOINT_SCRIPT", "SHELL_IMAGE", "ImageSpec", "ProcessKubelet", "default_images"]

_TESTS_DIR = Path(__file__).resolve().parents[2]


@dataclass
class ProcessKubelet:
    node_name: str
    state_dir: Path
    pod_cidr: str
    process: ManagedProcess
    pod_cidr_claim: IO[str] | None = None

    @classmethod
    def start(
        cls,
        kubeconfig: Path,
        state_dir: Path,
        *,
        images: Mapping[str, ImageSpec] | None = None,
        node_name: str | None = None,
        backoff: tuple[float, float] = (1.0, 10.0),
        timeout: float = 60.0,
    ) -> ProcessKubelet:
        images = images if images is not None else default_images()
        refuse_hidden_paths(images)  # in the test session, before the kubelet process starts
        state_dir.mkdir(parents=True, exist_ok=True)
        node_name = node_name or f"process-node-{uuid.uuid4().hex[:6]}"
        # A /16 of its own keeps its pods apart from those of concurrent test sessions and workers.
        pod_cidr, claim = claim_pod_cidr()
        images_file = state_dir / "images.json"
        images_file.write_text(images_to_json(images))
        ready_file = state_dir / "ready"
        ready_file.unlink(missing_ok=True)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_TESTS_DIR), env.get("PYTHONPATH")]))
        process = ManagedProcess(
            "process-kubelet",
            [
                sys.executable,
                "-m",
                "testkit.kubelet",
                "--kubeconfig",
                str(kubeconfig),
                "--node-name",
                node_name,
                "--state-dir",
                str(state_dir),
                "--pod-cidr",
                pod_cidr,
                "--images",
                str(images_file),
                "--ready-file",
                str(ready_file),
                "--backoff-base",
                str(backoff[0]),
                "--backoff-max",
                str(backoff[1]),
            ],
            state_dir / "kubelet.log",
            env=env,
            # It must end its pods' process groups, which a SIGKILL would leave running.
            death_signal=signal.SIGTERM,
        )
        kubelet = cls(node_name, state_dir, pod_cidr, process, claim)
        deadline = time.monotonic() + timeout
        while not ready_file.exists():
            if not process.running or time.monotonic() > deadline:
                kubelet.stop()
                raise RuntimeError(f"the process kubelet did not become ready:\n{process.log_tail()}")
            time.sleep(0.1)
        return kubelet

    def stop(self) -> None:
        self.process.stop(timeout=20)
        if self.pod_cidr_claim is not None:
            release_pod_cidr(self.pod_cidr_claim)

    def pod_dir(self, namespace: str, name: str) -> Path:
        """The state directory of the newest pod with this name (volumes, hosts file, logs)."""
        candidates = sorted(
            (self.state_dir / "pods").glob(f"{namespace}_{name}_*"), key=lambda p: p.stat().st_mtime
        )
        if not candidates:
            raise FileNotFoundError(f"the process kubelet has not run pod {namespace}/{name}")
        return candidates[-1]

    def container_log(self, namespace: str, name: str, container: str, restart: int | None = None) -> str:
        """Output of a container run: the latest by default, or the one after `restart` restarts."""
        logs = self.pod_dir(namespace, name) / "logs" / container
        if restart is None:
            runs = sorted(logs.glob("*.log"), key=lambda p: int(p.stem))
            if not runs:
                return ""
            return runs[-1].read_text(errors="replace")
        return (logs / f"{restart}.log").read_text(errors="replace")
