"""The Kafka example StreamJob (examples/k8s/kafka-streamjob.yaml) on the real node, against a real Kafka 4
broker that its pods reach over the cluster's network.

The broker runs in the node's network namespace on the node's address, as a broker outside the cluster
would be reached: the job's pods connect through the pod network, this machine over the veth pair. Orders
go in before the job starts, while it runs and while it is suspended; a read_committed consumer of the
output topic must see each order's total exactly once after the TaskManager's pod is deleted, a suspend
and resume from the stop savepoint, and a drained finish, with no transaction of the job left open.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
import yaml

from e2e._cluster import E2ECluster
from e2e._kafka_orders import (
    BATCH,
    KAFKA_JOB,
    assert_no_open_transactions,
    committed_totals,
    expected_totals,
    produce_orders,
    wait_totals,
)
from e2e._real_node import NODE_IP, RealNode, restricted_release
from e2e._real_node_jobs import DEPLOY_TIMEOUT, generation, wait_restarted_on_new_pods
from testkit.kafka import KafkaBroker, kafka_libs, unique_topic

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark, pytest.mark.kafka]

JOB = yaml.safe_load(KAFKA_JOB.read_text())["metadata"]["name"]
BROKER_PORT, CONTROLLER_PORT = 9092, 9093
"""Ports of the node's network namespace, where nothing else listens on them."""


@pytest.fixture(scope="module")
def node_broker(
    real_node: RealNode,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[KafkaBroker]:
    base_dir = tmp_path_factory.mktemp("node-kafka")
    broker = KafkaBroker(
        libs=kafka_libs(),
        base_dir=base_dir,
        port=BROKER_PORT,
        controller_port=CONTROLLER_PORT,
        host=NODE_IP,
        launcher=tuple(real_node.in_node()),
    )
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()
        shutil.rmtree(base_dir, ignore_errors=True)


@pytest.fixture
def release(real_node: RealNode) -> Iterator[E2ECluster]:
    with restricted_release(real_node) as cluster:
        cluster.operator.start()
        yield cluster


@pytest.mark.timeout(1800, func_only=True)
def test_kafka_job_on_a_real_node_writes_every_total_once_across_a_deleted_pod_and_suspend_resume(
    release: E2ECluster, node_broker: KafkaBroker
) -> None:
    e2e, broker = release, node_broker
    orders = broker.create_topic(unique_topic("orders"), 3)
    totals = broker.create_topic(unique_topic("totals"), 2)
    produce_orders(broker, orders, 0, BATCH)

    manifest = yaml.safe_load(KAFKA_JOB.read_text())
    args = {"bootstrap": broker.bootstrap_servers, "input": orders, "output": totals}
    manifest["spec"]["pipeline"]["args"].update(args)
    manifest["spec"]["taskManagers"]["replicas"] = 1  # both subtasks: two do not fit on the node's 2 CPUs
    e2e.apply(yaml.safe_dump(manifest))
    first_run = e2e.wait_running_with_checkpoint(JOB, timeout=DEPLOY_TIMEOUT)["status"]["job"]["id"]
    wait_totals(e2e, broker, totals, BATCH)

    # The TaskManager's pod deleted with the second batch on its way: its open transaction is aborted by
    # the restarted tasks' fencing, and what the checkpoint held is committed or sent again, once.
    produce_orders(broker, orders, BATCH, BATCH)
    (taskmanager,) = (pod["metadata"]["name"] for pod in e2e.taskmanager_pods(JOB))
    e2e.kubectl("delete", "pod", taskmanager, "--timeout=90s")
    wait_restarted_on_new_pods(e2e, JOB, 1, gone={taskmanager})
    wait_totals(e2e, broker, totals, 2 * BATCH)

    # Suspended: the savepoint's transactions are committed before the pods go, and nothing is left
    # open to hold back read_committed consumers while the job is down.
    e2e.set_state(JOB, "suspended")
    savepoint = e2e.wait_savepoint(f"{JOB}-suspend-{generation(e2e, JOB)}", "Completed", timeout=300)
    e2e.wait_lifecycle(JOB, "Suspended")
    e2e.wait_pods_gone(JOB)
    assert_no_open_transactions(broker, totals, [first_run])
    assert committed_totals(broker, totals) == expected_totals(2 * BATCH)

    # Orders that arrive while the job is suspended are read by the resumed run from the savepoint's
    # offsets: none is skipped, none read twice.
    produce_orders(broker, orders, 2 * BATCH, BATCH)
    e2e.set_state(JOB, "running")
    resumed = e2e.wait_running_with_checkpoint(JOB, timeout=DEPLOY_TIMEOUT)["status"]["job"]
    assert resumed["id"] != first_run and resumed["restoredFrom"] == savepoint["status"]["path"], resumed
    wait_totals(e2e, broker, totals, 3 * BATCH)

    # Drained: the final savepoint commits the last transaction.
    e2e.set_state(JOB, "finished")
    e2e.wait_savepoint(f"{JOB}-terminate-{generation(e2e, JOB)}", "Completed", timeout=300)
    e2e.wait_lifecycle(JOB, "Finished")
    e2e.wait_pods_gone(JOB)
    assert_no_open_transactions(broker, totals, [first_run, resumed["id"]])
    assert committed_totals(broker, totals) == expected_totals(3 * BATCH)
