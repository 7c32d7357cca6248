"""`pytest -n 2 --dist loadgroup` (scripts/test.sh) keeps a group's tests on one worker.

The tiers rely on it: the integration tier's Spark, control-plane and Kafka tests share one session
service per group, and the real node's tests (one cluster per machine) must run one after another on
one worker. With pytest 9.2 and pytest-xdist 3.8 the grouping silently stopped (xdist marks a group in
a node id that pytest 9.2 no longer reads; pytest-dev/pytest-xdist#1386): the real-node tests ran on
both workers at once, and the first worker to finish took the cluster down under the other's tests.
This runs the e2e tier's real scheduling, every test skipped before its fixtures, and reads which
worker got which test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from testkit.kube import REPO_ROOT

_RECORDER = """
import os, pytest

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    with open(os.environ["SLUICE_TEST_SCHEDULE"], "a") as out:
        out.write(f"{os.environ['PYTEST_XDIST_WORKER']} {item.nodeid}\\n")
    pytest.skip("scheduling only")
"""


def test_the_real_node_tests_all_run_on_one_worker_and_the_others_are_shared_out(tmp_path: Path) -> None:
    (tmp_path / "schedule_recorder.py").write_text(_RECORDER)
    schedule = tmp_path / "schedule.txt"
    # Not into the timeline of the run this test is part of (scripts/test.sh's): these tests are skipped.
    env = {
        **{name: value for name, value in os.environ.items() if name != "SLUICE_TEST_TIMELINE"},
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
        "SLUICE_TEST_SCHEDULE": str(schedule),
    }
    argv = [sys.executable, "-m", "pytest", "tests/e2e", "-n", "2", "--dist", "loadgroup"]
    argv += ["-p", "schedule_recorder", "-p", "no:cacheprovider", "-q"]
    result = subprocess.run(
        argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    workers: dict[str, set[str]] = defaultdict(set)
    for line in schedule.read_text().splitlines():
        worker, nodeid = line.split(" ", 1)
        workers[nodeid.split("::", 1)[0]].add(worker)
    real_node = {path: seen for path, seen in workers.items() if Path(path).name.startswith("test_real_node")}
    assert len(real_node) >= 4, workers
    assert len(set().union(*real_node.values())) == 1, real_node
    assert len(set().union(*workers.values())) == 2, "the other e2e tests ran on one worker only"
