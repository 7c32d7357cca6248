"""examples/enrichment.py end to end against plain Python: on a clean run, and across a TaskManager
SIGKILLed after the customer input had finished (the restart must not read it again, and keeps what
it gave)."""

from __future__ import annotations

import collections
import json
import os
import signal
from pathlib import Path
from typing import Any

from testkit import spark
from testkit.jobs import REPO, SluiceJob
from testkit.outputs import assert_same_output, read_output
from testkit.spark import Runner

# The clean run on threads of the test process and on Spark; the processes host runs the killed case.
engine_runner = spark.engine_runner

EXAMPLE = REPO / "examples" / "enrichment.py"
CUSTOMERS = 300
DISCOUNT = {"gold": 20, "silver": 10, "basic": 0}


def expected(orders: int) -> collections.Counter[str]:
    """The example's input written out again here, so the test does not trust the example's code."""
    tiers = ["gold", "silver", "basic", "basic"]
    out: collections.Counter[str] = collections.Counter()
    for i in range(orders):
        c = (i * 7) % CUSTOMERS
        amount, tier = 100 + i % 900, tiers[c % 4]
        row = [f"o{i}", f"c{c}", f"customer {c}", tier, amount, amount * (100 - DISCOUNT[tier]) // 100]
        out[json.dumps(row)] += 1
    return out


def _inputs_of_enrich(job: SluiceJob) -> list[dict[str, Any]]:
    [vertex] = [v for v in job.get("/v1/job")["vertices"] if "enrich" in v["uids"]]
    inputs: list[dict[str, Any]] = vertex["inputs"]
    return inputs


def _table_ended_unread(job: SluiceJob) -> bool:
    [table] = [v for v in job.get("/v1/job")["vertices"] if "customers" in v["uids"]]
    states = {t["state"] for t in table["subtasks"]}
    return states == {"FINISHED"} and table["metrics"]["recordsIn"] == 0


def test_enrichment_example_matches_plain_python(engine_runner: Runner, tmp_path: Path) -> None:
    out, orders = tmp_path / "out", 6_000
    done = engine_runner.run(
        EXAMPLE,
        "--arg", f"out={out}",
        "--arg", f"orders={orders}",
        "--arg", f"customers={CUSTOMERS}",
        "--parallelism", "2",
        "--checkpoint-dir", f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval", "300ms",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert_same_output(read_output(str(out)), expected(orders))


def test_enrichment_is_exactly_once_across_a_killed_taskmanager_after_the_table_finished(
    tmp_path: Path,
) -> None:
    out, orders = tmp_path / "out", 30_000
    job = SluiceJob(
        EXAMPLE,
        "--arg", f"out={out}",
        "--arg", f"orders={orders}",
        "--arg", f"customers={CUSTOMERS}",
        "--arg", "rate=5000",
        "--parallelism", "2",
        "--checkpoint-dir", f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval", "300ms",
        "--restart-delay", "200ms",
    )  # fmt: skip
    try:
        # The customer table ends first; the operator runs on with the orders and shows that input finished.
        job.wait_until(
            lambda: [i["finished"] for i in _inputs_of_enrich(job)] == [False, True], 60, "table done"
        )
        done_at = job.completed_checkpoints()
        job.wait_checkpoints(done_at + 2)  # checkpoints go on with one input finished
        assert job.get("/v1/job")["state"] == "RUNNING"
        os.kill(job.taskmanager_pids()[1], signal.SIGKILL)
        job.wait_until(lambda: job.get("/v1/job")["restarts"] >= 1, 60, "the restart")
        # The new attempt restored the table's operators as finished: their subtasks end without reading
        # a line (a rerun would count CUSTOMERS records in again), and the input shows finished.
        job.wait_until(lambda: _table_ended_unread(job), 60, "the table's subtasks finished unread")
        assert [i["finished"] for i in _inputs_of_enrich(job)] == [False, True]
        code = job.wait(180)
    finally:
        job.kill()
    assert code == 0, job.stderr
    # Every order once, each with its customer: the restored state still had the table, not read again.
    assert_same_output(read_output(str(out)), expected(orders))
