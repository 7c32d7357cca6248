"""The package as a user gets it: `uv build` both ways, installed into a fresh venv, run outside the checkout.

`uv build` makes the sdist and builds the wheel from the unpacked sdist; `uv build --wheel` builds the
wheel from the checkout. Both wheels must hold the same files, the Spark-on-Kubernetes jar among them
(git ignores the jar, so an sdist that forgets it makes a wheel without it). The installed wheel then
runs the README's pipeline from a directory outside the checkout, on both hosts, with the dashboard
served, and stops it with its own `sluice stop --drain`.

The fresh venv gets the locked runtime dependencies from uv's cache (`uv sync --no-install-project
--no-dev` into it) and then the wheel alone: nothing of the checkout is importable there.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from testkit.jobs import REPO
from testkit.outputs import read_output

JAR = "sluice/hosts/spark/_jvm/sluice-spark-kubernetes.jar"
README_PIPELINE = REPO / "examples" / "w1_window_counts.py"
_REST = re.compile(r"REST API at (http://\S+)")


def _uv() -> str:
    found = shutil.which("uv") or str(REPO / ".cache" / "uv-bin" / "bin" / "uv")
    if not Path(found).exists():
        pytest.fail("no uv on PATH nor in .cache/uv-bin: run scripts/setup.sh (it installs the pinned uv)")
    return found


def _uv_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    # The cache scripts/setup.sh filled (its default, the machine's): the venv below installs offline.
    cache = os.environ.get("SLUICE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sluice"
    )
    env.setdefault("UV_CACHE_DIR", os.path.join(cache, "uv"))
    env["UV_PYTHON_DOWNLOADS"] = "never"
    return env


def _build(out: Path, *options: str) -> Path:
    done = subprocess.run(
        [_uv(), "build", "--out-dir", str(out), *options],
        cwd=REPO,
        env=_uv_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = out.glob("*.whl")
    return wheel


def _contents(wheel: Path) -> dict[str, str]:
    with zipfile.ZipFile(wheel) as archive:
        return {
            name: hashlib.sha256(archive.read(name)).hexdigest()
            for name in archive.namelist()
            if not name.endswith(".dist-info/RECORD")  # lists the same files, in an order of its own
        }


@dataclass(frozen=True)
class Wheels:
    from_sdist: Path
    direct: Path


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    base = tmp_path_factory.mktemp("wheels")
    return Wheels(from_sdist=_build(base / "sdist-then-wheel"), direct=_build(base / "wheel-only", "--wheel"))


@pytest.fixture(scope="module")
def venv(wheels: Wheels, tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("venv") / "venv"
    env = {**_uv_env(), "UV_PROJECT_ENVIRONMENT": str(where)}
    for command in (
        [_uv(), "sync", "--frozen", "--offline", "--no-install-project", "--no-dev", "--python", "python3"],
        [
            _uv(),
            "pip",
            "install",
            "--offline",
            "--no-deps",
            "--python",
            str(where / "bin" / "python"),
            str(wheels.from_sdist),
        ],
    ):
        done = subprocess.run(
            command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False
        )
        assert done.returncode == 0, f"{command}: {done.stderr}"
    return where


def test_both_build_paths_make_the_same_wheel_with_the_spark_kubernetes_jar(wheels: Wheels) -> None:
    from_sdist, direct = _contents(wheels.from_sdist), _contents(wheels.direct)
    assert JAR in direct
    assert JAR in from_sdist, "the wheel built from the sdist lacks the Spark-on-Kubernetes jar"
    assert from_sdist == direct


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "elsewhere"
    where.mkdir()
    shutil.copy(README_PIPELINE, where / "w1_window_counts.py")
    yield where


def _fetch(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.headers.get("Content-Type", ""), response.read()


def _wait_running(url: str, lines: list[str]) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if json.loads(_fetch(url + "/v1/job")[2])["state"] == "RUNNING":
            return
        time.sleep(0.2)
    raise AssertionError("the job did not start running:\n" + "".join(lines))


@pytest.mark.parametrize("host", ["processes", "spark"])
def test_the_installed_wheel_runs_the_readme_pipeline_outside_the_checkout(
    venv: Path, outside: Path, host: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    # Where the package comes from: the venv, not the checkout.
    origin = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sluice; print(sluice.__file__)"],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    assert origin.startswith(str(venv)), origin
    # Far more numbers than the test waits for: the job runs until `sluice stop --drain` ends it.
    job = subprocess.Popen(
        [
            str(venv / "bin" / "sluice"),
            "run",
            "w1_window_counts.py",
            "--arg",
            "n=1000000000",
            "--arg",
            f"out={outside / 'out'}",
            "--parallelism",
            "2",
            "--checkpoint-dir",
            f"file://{outside / 'chk'}",
            "--checkpoint-interval",
            "1s",
            "--rest-port",
            "0",
            "--host",
            host,
        ],
        cwd=outside,
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    lines: list[str] = []
    url: list[str] = []
    seen = threading.Event()

    def read() -> None:
        assert job.stderr is not None
        for line in job.stderr:
            lines.append(line)
            match = _REST.search(line)
            if match and not url:
                url.append(match.group(1))
                seen.set()
        seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert seen.wait(180) and url, "".join(lines)
        status, kind, page = _fetch(url[0] + "/")
        assert status == 200 and kind.startswith("text/html") and b"/dashboard/app.js" in page
        status, kind, script = _fetch(url[0] + "/dashboard/app.js")
        assert status == 200 and b"refresh" in script
        _wait_running(url[0], lines)
        stopped = subprocess.run(
            [str(venv / "bin" / "sluice"), "stop", "--drain", "--address", url[0]],
            cwd=outside,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert stopped.returncode == 0, stopped.stderr + "".join(lines)
        assert job.wait(120) == 0, "".join(lines)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
        reader.join(10)
    counts = read_output(f"file://{outside / 'out'}")
    assert counts, "the drained job committed no window counts"
    rows = [json.loads(row) for row in counts]
    # [key, window start, count, sum] (the README's rows): a key of the pipeline, a window start on
    # the one-second grid of event time, a window that holds at least one event.
    assert all(
        len(row) == 4 and 0 <= row[0] < 1000 and row[1] >= 0 and row[1] % 1000 == 0 and row[2] > 0
        for row in rows
    ), rows[:5]
