"""Bounded buffers: a slow sink slows its source down instead of letting records pile up in memory.

The two TaskManagers are threads of the test (`ThreadJob`); records between them still go through
credit-based channels over loopback sockets, as between TaskManager processes.
"""

from __future__ import annotations

import time
from pathlib import Path

from testkit.checkpoints import PIPELINES
from testkit.inprocess import ThreadJob


def test_slow_sink_slows_the_source(tmp_path: Path) -> None:
    job = ThreadJob(
        PIPELINES / "slow_sink.py",
        "--taskmanagers",
        "2",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval",
        "1s",
    )
    try:
        job.wait_until(lambda: job.get("/v1/job")["state"] == "RUNNING", 60, "RUNNING")
        time.sleep(4)
        vertices = {v["uids"][0]: v["metrics"] for v in job.get("/v1/job")["vertices"]}
        emitted, consumed = vertices["fast"]["recordsOut"], vertices["slow"]["recordsIn"]
    finally:
        job.kill()
    # Two sinks at one 1024-record batch per 50 ms take about 40,000 records/s; an unthrottled generator
    # makes millions in the same time. What is in flight is bounded by channel queues and socket buffers.
    assert consumed > 0
    assert emitted - consumed < 50_000, f"{emitted} emitted but only {consumed} consumed: records pile up"
    assert emitted < 400_000
