"""Process kubelets of one machine (concurrent test sessions, pytest-xdist workers) share the host's
mount points: one never removes a path another's pod has been handed, even before that pod mounts it."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

from testkit.kubelet._mountpoints import MountPoints
from testkit.kubelet._volumes import Mount

LOG = logging.getLogger("test")


def _kubelets(tmp_path: Path) -> tuple[MountPoints, MountPoints, Path, Path]:
    registry, source = tmp_path / "registry", tmp_path / "volume"
    source.mkdir()
    # Two live processes stand for the two kubelets: this test and its parent.
    first = MountPoints(LOG, registry, identity=os.getpid())
    second = MountPoints(LOG, registry, identity=os.getppid())
    return first, second, source, tmp_path / "host" / "var" / "run" / "state"


def test_a_path_another_kubelets_pod_was_handed_stays_until_that_pod_is_done(tmp_path: Path) -> None:
    first, second, source, target = _kubelets(tmp_path)
    volume = [Mount(str(source), str(target), read_only=True)]
    first.acquire("pod-a", volume, str(tmp_path))
    assert target.is_dir()
    second.acquire("pod-b", volume, str(tmp_path))  # the path is there: the second creates nothing

    first.release("pod-a")
    assert target.is_dir(), "pod-b of the other kubelet has not mounted it yet, and will"

    second.release("pod-b")
    first.acquire("pod-c", volume, str(tmp_path))
    first.release("pod-c")
    assert not target.exists() and not target.parent.exists(), "nobody uses it: the creator removes it"


def test_the_registration_of_a_kubelet_that_is_gone_is_dropped(tmp_path: Path) -> None:
    registry, source = tmp_path / "registry", tmp_path / "volume"
    source.mkdir()
    target = tmp_path / "mnt" / "config"
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True
    )
    gone_pid = int(ended.stdout)
    gone = MountPoints(LOG, registry, identity=gone_pid)
    here = MountPoints(LOG, registry, identity=os.getpid())
    volume = [Mount(str(source), str(target), read_only=False)]
    here.acquire("pod-a", volume, str(tmp_path))
    gone.acquire("pod-b", volume, str(tmp_path))
    assert (registry / f"{gone_pid}.json").exists()

    here.release("pod-a")
    assert not target.exists(), "the other kubelet's process has ended, and its pods with it"
    assert not (registry / f"{gone_pid}.json").exists()
