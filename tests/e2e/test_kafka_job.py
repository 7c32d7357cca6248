"""The Kafka example StreamJob (examples/k8s/kafka-streamjob.yaml) against a real Kafka 4 broker.

The manifest is applied with only its broker address and topics replaced. The test's broker listens on
this machine's loopback, which the process kubelet's pods share; orders go in before the job starts,
while it runs and while it is suspended, and a read_committed consumer of the output topic must see each
order's total exactly once after a SIGKILLed TaskManager, a suspend and resume from the stop savepoint,
and a drained finish, with no transaction of the job left open on the broker.
"""

from __future__ import annotations

import collections
import json
import signal
from typing import Any

import pytest
import yaml

from e2e._cluster import EXAMPLES, E2ECluster, E2EFailure
from testkit.kafka import KafkaBroker, unique_topic
from testkit.kubelet import ProcessKubelet

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark, pytest.mark.kafka]

KAFKA_JOB = EXAMPLES / "kafka-streamjob.yaml"
JOB = yaml.safe_load(KAFKA_JOB.read_text())["metadata"]["name"]
BATCH = 600  # orders per batch; three batches


def _manifest(broker: KafkaBroker, orders: str, totals: str) -> str:
    manifest = yaml.safe_load(KAFKA_JOB.read_text())
    manifest["spec"]["pipeline"]["args"].update(
        bootstrap=broker.bootstrap_servers, input=orders, output=totals
    )
    return yaml.safe_dump(manifest)


def _produce_orders(broker: KafkaBroker, topic: str, first: int, count: int) -> None:
    orders = (
        {"order": n, "items": [{"price": n % 17, "qty": q + 1} for q in range(n % 4)]}
        for n in range(first, first + count)
    )
    broker.produce(topic, (json.dumps(o) for o in orders))


def _expected(count: int) -> dict[int, int]:
    return {n: sum((n % 17) * (q + 1) for q in range(n % 4)) for n in range(count)}


def _committed_totals(broker: KafkaBroker, topic: str) -> dict[int, int]:
    """What a read_committed consumer sees of the output topic; fails on any order seen twice."""
    records = [json.loads(v) for _, _, v in broker.consume_all(topic) if v is not None]
    twice = sorted(n for n, c in collections.Counter(r["order"] for r in records).items() if c > 1)
    if twice:  # never turns good again: fail at once rather than poll
        raise E2EFailure(f"{len(twice)} orders written more than once, e.g. {twice[:10]}")
    return {r["order"]: r["total"] for r in records}


def _wait_totals(e2e: E2ECluster, broker: KafkaBroker, topic: str, count: int) -> None:
    """Until every order below `count` has its total committed (checked exactly once on each look)."""

    def complete() -> bool:
        seen = _committed_totals(broker, topic)
        if unknown := set(seen) - set(range(count)):
            raise E2EFailure(f"totals of orders not produced yet: {sorted(unknown)[:10]}")
        return len(seen) == count

    e2e.wait(f"{count} totals committed to {topic}", complete, timeout=120)
    assert _committed_totals(broker, topic) == _expected(count)


def _assert_no_open_transactions(broker: KafkaBroker, topic: str, runs: list[str]) -> None:
    broker.wait_stable(topic)  # an open transaction would hold back the last stable offset
    mine = [t for t in broker.open_transactions() if any(t.startswith(f"sluice-{run}-") for run in runs)]
    assert not mine, f"transactions of the job left open: {mine}"


def _generation(e2e: E2ECluster) -> int:
    return int(e2e.get("streamjob", JOB)["metadata"]["generation"])  # type: ignore[index]


@pytest.mark.timeout(600)
def test_kafka_job_writes_every_total_once_across_a_killed_taskmanager_and_suspend_resume(
    e2e: E2ECluster, kafka_broker: KafkaBroker, process_kubelet: ProcessKubelet | None
) -> None:
    if process_kubelet is None:
        pytest.skip("the test broker listens on this machine's loopback, out of a real cluster's reach")
    orders = kafka_broker.create_topic(unique_topic("orders"), 3)
    totals = kafka_broker.create_topic(unique_topic("totals"), 2)
    _produce_orders(kafka_broker, orders, 0, BATCH)

    e2e.apply(_manifest(kafka_broker, orders, totals))
    first_run = e2e.wait_running_with_checkpoint(JOB)["status"]["job"]["id"]
    # Committed while the job runs (a transaction per checkpoint), not only at its end.
    _wait_totals(e2e, kafka_broker, totals, BATCH)

    # A TaskManager is SIGKILLed with the second batch on its way: its open transaction is aborted by
    # the restarted run's fencing, and what the checkpoint held is committed or re-sent, once.
    _produce_orders(kafka_broker, orders, BATCH, BATCH)
    job: dict[str, Any] = e2e.coordinator(JOB, "/v1/job")
    victim = job["taskManagers"][0]
    e2e.signal_process(e2e.taskmanager_pod_of(JOB, victim["host"]), victim["pid"], signal.SIGKILL)
    e2e.wait_restarted(JOB, 1, {tm["pid"] for tm in job["taskManagers"]})
    _wait_totals(e2e, kafka_broker, totals, 2 * BATCH)

    # Suspend: stop with a savepoint, no drain. The savepoint's transactions are committed before the
    # pods go, and nothing is left open to hold back read_committed consumers while the job is down.
    e2e.set_state(JOB, "suspended")
    savepoint = e2e.wait_savepoint(f"{JOB}-suspend-{_generation(e2e)}", "Completed")
    e2e.wait_lifecycle(JOB, "Suspended")
    e2e.wait_pods_gone(JOB, timeout=60)
    _assert_no_open_transactions(kafka_broker, totals, [first_run])
    assert _committed_totals(kafka_broker, totals) == _expected(2 * BATCH)

    # Orders that arrive while the job is suspended are read by the resumed run from the savepoint's
    # offsets: none is skipped, none read twice.
    _produce_orders(kafka_broker, orders, 2 * BATCH, BATCH)
    e2e.set_state(JOB, "running")
    resumed = e2e.wait_running_with_checkpoint(JOB)["status"]["job"]
    assert resumed["id"] != first_run and resumed["restoredFrom"] == savepoint["status"]["path"], resumed
    _wait_totals(e2e, kafka_broker, totals, 3 * BATCH)

    # Finish: drain, the final savepoint commits the last transaction.
    e2e.set_state(JOB, "finished")
    e2e.wait_savepoint(f"{JOB}-terminate-{_generation(e2e)}", "Completed")
    finished = e2e.wait_lifecycle(JOB, "Finished")
    assert finished["status"]["job"]["restarts"] == 0, "the resumed run restarted"
    e2e.wait_pods_gone(JOB)
    _assert_no_open_transactions(kafka_broker, totals, [first_run, resumed["id"]])
    assert _committed_totals(kafka_broker, totals) == _expected(3 * BATCH)
