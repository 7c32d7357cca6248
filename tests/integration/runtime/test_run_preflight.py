"""`sluice run` finds a REST port it cannot use, or a checkpoint directory it cannot write, before it
starts anything: exit 2 (bad arguments) with one line saying what is wrong and what to give instead."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from testkit.jobs import REPO, SLUICE

README_PIPELINE = REPO / "examples" / "w1_window_counts.py"


def _run(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SLUICE, "run", str(README_PIPELINE), "--arg", f"out={tmp_path / 'out'}", *options],
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "error" in line]


def test_a_rest_port_out_of_range_is_a_usage_error(tmp_path: Path) -> None:
    done = _run(tmp_path, "--checkpoint-dir", f"file://{tmp_path / 'chk'}", "--rest-port", "70000")
    assert done.returncode == 2, done.stderr
    assert "--rest-port" in done.stderr and "70000 is not a port" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_taken_rest_port_is_refused_before_spark_starts(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = _run(
            tmp_path,
            "--host",
            "spark",
            "--checkpoint-dir",
            f"file://{tmp_path / 'chk'}",
            "--rest-port",
            str(port),
        )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    errors = _error_lines(done.stderr)
    assert len(errors) == 1, done.stderr
    assert f"the REST port 127.0.0.1:{port} is in use" in errors[0] and "--rest-port 0" in errors[0]
    # The Spark host announces its master and log when it starts: it never did.
    assert "Spark's log" not in done.stderr
    assert not (tmp_path / "chk").exists() or not any((tmp_path / "chk").iterdir())


def test_an_unwritable_checkpoint_dir_is_refused_before_the_job_starts(tmp_path: Path) -> None:
    done = _run(
        tmp_path, "--host", "processes", "--rest-port", "0", "--checkpoint-dir", "file:///proc/sluice-x"
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    errors = _error_lines(done.stderr)
    assert len(errors) == 1, done.stderr
    assert "--checkpoint-dir file:///proc/sluice-x: cannot write there" in errors[0]
    assert "REST API at" not in done.stderr  # nothing was started
