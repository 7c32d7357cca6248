"""A checkout under /tmp cannot run the operator's pods on the process kubelet (their emptyDir at /tmp
hides it): the kubelet refuses it when it starts, and a container whose working directory or command a
volume hides fails saying so instead of with a bare ENOENT."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.kubelet._enter import hidden_message, hiding_mount
from testkit.kubelet._host_paths import HiddenHostPath, hidden, needed_paths, refuse_hidden_paths
from testkit.kubelet._images import REPO_ROOT, ImageSpec, default_images

ENTER = Path(__file__).resolve().parents[2] / "testkit" / "kubelet" / "_enter.py"


def test_a_checkout_under_tmp_is_refused_naming_the_fix() -> None:
    images = {"*": ImageSpec(entrypoint=("/tmp/sluice/docker/entrypoint.sh",), workdir="/tmp/sluice")}
    with pytest.raises(HiddenHostPath) as refused:
        refuse_hidden_paths(images)
    message = str(refused.value)
    assert "the working directory of images '*', /tmp/sluice, is under /tmp" in message
    assert "the entrypoint of images '*', /tmp/sluice/docker/entrypoint.sh, is under /tmp" in message
    assert "Clone the repository outside /tmp" in message


def test_this_checkout_and_its_python_pass() -> None:
    assert not str(REPO_ROOT).startswith("/tmp/"), "this test needs a checkout outside /tmp"
    refuse_hidden_paths(default_images())  # raises if anything the pods run from is under /tmp
    assert "the Python environment (sys.prefix)" in needed_paths(default_images())


def test_symbolic_links_are_resolved_and_neighbours_are_not_under(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    (scratch / "repo").mkdir(parents=True)
    (tmp_path / "link").symlink_to(scratch / "repo")
    paths = {"a": tmp_path / "link", "b": tmp_path / "scratch-not", "c": scratch}
    assert hidden(paths, scratch=[str(scratch)]) == [
        f"a, {scratch / 'repo'}, is under {scratch}",
        f"c, {scratch}, is under {scratch}",
    ]


def test_the_deepest_mount_above_a_path_is_the_one_that_hides_it() -> None:
    targets = ["/tmp", "/tmp/cache", "/home/sluice"]
    assert hiding_mount("/tmp/cache/x", targets) == "/tmp/cache"
    assert hiding_mount("/tmp/sluice", targets) == "/tmp"
    assert hiding_mount("/tmpx/sluice", targets) is None
    assert "clone it elsewhere" in hidden_message("working directory", "/tmp/sluice", "/tmp")


@pytest.mark.skipif(os.geteuid() != 0, reason="a mount namespace needs root, as the process kubelet does")
def test_a_container_whose_working_directory_a_volume_hides_fails_saying_so(tmp_path: Path) -> None:
    host = tmp_path / "host"
    (host / "checkout").mkdir(parents=True)
    volume = tmp_path / "volume"
    volume.mkdir()
    read, write = os.pipe()
    spec = {
        "mounts": [{"source": str(volume), "target": str(host), "read_only": False}],
        "hostname": "pod",
        "cwd": str(host / "checkout"),
        "exec_fd": write,
        "argv": ["/bin/true"],
        "env": {},
    }
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    try:
        ran = subprocess.run(
            [sys.executable, "-I", "-S", str(ENTER), str(spec_file)],
            check=False,
            pass_fds=(write,),
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        os.close(read)
        os.close(write)
    assert ran.returncode == 128
    assert (
        f"{host / 'checkout'} (the container's working directory) is hidden by the volume mounted at {host}"
        in (ran.stderr)
    )
