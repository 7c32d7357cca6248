"""The timeline scripts/test.sh has each tier's tests write, and what `_slowest.py --workers` makes of it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from testkit.kube import REPO_ROOT


def test_each_test_writes_its_worker_and_times_and_the_summary_names_each_workers_tail(
    tmp_path: Path,
) -> None:
    tests = tmp_path / "test_two.py"
    tests.write_text("import time\n\ndef test_a():\n    time.sleep(0.2)\n\ndef test_b():\n    pass\n")
    timeline = tmp_path / "timeline"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(tests),
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "testkit.timeline",
        ],
        check=True,
        capture_output=True,
        cwd=tmp_path,
        env={
            "SLUICE_TEST_TIMELINE": str(timeline),
            "PYTHONPATH": str(REPO_ROOT / "tests"),
            "PATH": "/usr/bin:/bin",
        },
    )
    lines = [json.loads(line) for line in timeline.read_text().splitlines()]
    assert [line["test"] for line in lines] == ["test_two.py::test_a", "test_two.py::test_b"]
    assert {line["worker"] for line in lines} == {"main"}
    assert lines[0]["end"] - lines[0]["start"] >= 0.2 and lines[1]["start"] >= lines[0]["end"]

    summary = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "_slowest.py"), "--workers", str(timeline)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert summary.startswith("main 2 tests, 0s in tests, done at 0s"), summary
