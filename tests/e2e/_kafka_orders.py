"""Orders in, totals out: what the Kafka example job (examples/k8s/kafka-streamjob.yaml) reads and
writes, and how a test checks that a read_committed consumer sees every order's total exactly once."""

from __future__ import annotations

import collections
import json

from e2e._cluster import EXAMPLES, E2ECluster, E2EFailure
from testkit.kafka import KafkaBroker

KAFKA_JOB = EXAMPLES / "kafka-streamjob.yaml"
BATCH = 600  # orders per batch


def produce_orders(broker: KafkaBroker, topic: str, first: int, count: int) -> None:
    orders = (
        {"order": n, "items": [{"price": n % 17, "qty": q + 1} for q in range(n % 4)]}
        for n in range(first, first + count)
    )
    broker.produce(topic, (json.dumps(o) for o in orders))


def expected_totals(count: int) -> dict[int, int]:
    return {n: sum((n % 17) * (q + 1) for q in range(n % 4)) for n in range(count)}


def committed_totals(broker: KafkaBroker, topic: str) -> dict[int, int]:
    """What a read_committed consumer sees of the output topic; fails on any order seen twice."""
    records = [json.loads(v) for _, _, v in broker.consume_all(topic) if v is not None]
    twice = sorted(n for n, c in collections.Counter(r["order"] for r in records).items() if c > 1)
    if twice:  # never turns good again: fail at once rather than poll
        raise E2EFailure(f"{len(twice)} orders written more than once, e.g. {twice[:10]}")
    return {r["order"]: r["total"] for r in records}


def wait_totals(e2e: E2ECluster, broker: KafkaBroker, topic: str, count: int) -> None:
    """Until every order below `count` has its total committed (checked exactly once on each look)."""

    def complete() -> bool:
        seen = committed_totals(broker, topic)
        if unknown := set(seen) - set(range(count)):
            raise E2EFailure(f"totals of orders not produced yet: {sorted(unknown)[:10]}")
        return len(seen) == count

    e2e.wait(f"{count} totals committed to {topic}", complete, timeout=120)
    assert committed_totals(broker, topic) == expected_totals(count)


def assert_no_open_transactions(broker: KafkaBroker, topic: str, runs: list[str]) -> None:
    broker.wait_stable(topic)  # an open transaction would hold back the last stable offset
    mine = [t for t in broker.open_transactions() if any(t.startswith(f"sluice-{run}-") for run in runs)]
    assert not mine, f"transactions of the job left open: {mine}"
