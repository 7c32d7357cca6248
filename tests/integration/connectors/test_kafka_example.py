"""examples/kafka_exactly_once.py end to end: what read_committed consumers see equals plain Python (the job
in the test process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testkit.inprocess import run_thread_job
from testkit.jobs import REPO
from testkit.kafka import KafkaBroker, unique_topic

pytestmark = pytest.mark.kafka


def test_the_kafka_example_writes_every_total_once(kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    source = kafka_broker.create_topic(unique_topic("orders"), 3)
    sink = kafka_broker.create_topic(unique_topic("totals"), 2)
    orders: list[dict[str, Any]] = [
        {"order": n, "items": [{"price": n % 17, "qty": q} for q in range(n % 4)]} for n in range(900)
    ]
    kafka_broker.produce(source, [json.dumps(o) for o in orders])
    done = run_thread_job(
        REPO / "examples" / "kafka_exactly_once.py",
        "--arg", f"bootstrap={kafka_broker.bootstrap_servers}", "--arg", f"input={source}",
        "--arg", f"output={sink}", "--arg", "bounded=1", "--parallelism", "2",
        "--checkpoint-dir", f"file://{tmp_path / 'chk'}", "--checkpoint-interval", "500ms",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # The job's last transactions are decided once its commit calls have returned, but their markers reach
    # the partitions after that: read before them, the last stable offset left a final transaction of
    # 400 totals out (a full run, once). Nothing left open either: that would fail here.
    kafka_broker.wait_stable(sink)
    got = sorted((json.loads(v) for _, _, v in kafka_broker.consume_all(sink) if v), key=lambda t: t["order"])
    assert got == [
        {"order": o["order"], "total": sum(i["price"] * i["qty"] for i in o["items"])} for o in orders
    ]
