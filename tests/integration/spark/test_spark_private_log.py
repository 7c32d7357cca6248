"""Spark's log on the default host: in the user's private scratch directory, 0600, never through a link."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from testkit.jobs import REPO, run_job

W1 = REPO / "examples" / "w1_window_counts.py"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.mark.spark
def test_spark_logs_by_default_to_a_private_file(tmp_path: Path) -> None:
    done = run_job(
        W1,
        "--host",
        "spark",
        "--arg",
        "n=5000",
        "--arg",
        f"out={tmp_path / 'out'}",
        "--job-id",
        "orders",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        env={"TMPDIR": str(tmp_path)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    logs = tmp_path / f"sluice-{os.geteuid()}" / "spark-logs"
    log = logs / "orders.log"
    assert f"Spark's log: {log}" in done.stderr
    assert "Running Spark version" in log.read_text(), "log4j appended to the file made for it"
    assert (mode(logs.parent), mode(logs), mode(log), mode(logs / "orders.log.log4j2.properties")) == (
        0o700,
        0o700,
        0o600,
        0o600,
    )


def test_a_link_planted_in_place_of_the_log_directory_is_refused(tmp_path: Path) -> None:
    scratch = tmp_path / f"sluice-{os.geteuid()}"
    scratch.mkdir(mode=0o700)
    elsewhere = tmp_path / "victim"
    elsewhere.mkdir()
    (scratch / "spark-logs").symlink_to(elsewhere)
    done = run_job(
        W1,
        "--host",
        "spark",
        "--arg",
        f"out={tmp_path / 'out'}",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        env={"TMPDIR": str(tmp_path)},
    )
    assert done.returncode == 2, done.stderr
    assert f"{scratch / 'spark-logs'} is a symbolic link, not a directory of yours" in done.stderr
    assert "(or give --spark-log FILE)" in done.stderr
    assert list(elsewhere.iterdir()) == []
