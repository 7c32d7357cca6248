"""KafkaSink against a real Kafka 4 broker: what a read_committed consumer sees, and nothing left open.

The job writes the numbers 0 … COUNT-1 (JSON); exactly once means each appears once among the topic's
committed records. The jobs run in the test process (`ThreadJob`), except the one whose TaskManager is
killed by SIGKILL: a real `sluice run` with TaskManager processes.
"""

from __future__ import annotations

import collections
import os
import signal
from pathlib import Path

import pytest

from sluice.connectors import KafkaSink
from sluice.connectors.kafka import KafkaAtLeastOnceSink
from testkit.checkpoints import load, metadata_files, operator
from testkit.inprocess import ThreadJob, run_thread_job
from testkit.jobs import SluiceJob
from testkit.kafka import KafkaBroker, unique_topic

from .test_kafka_source import stop_with_savepoint

pytestmark = pytest.mark.kafka
PIPELINE = Path(__file__).parent / "pipelines" / "numbers_to_kafka.py"
COUNT = 12_000
# The input of a job stopped mid-run lasts 12 s: the stop (`sluice stop`, a process of its own) comes
# long before its end even on a loaded machine. Had the input ended first, the stop would race the end
# of the job. The resumed job reads the rest at full speed.
_STOPPED_RATE = 1000


def _numbers(broker: KafkaBroker, topic: str) -> collections.Counter[int]:
    return collections.Counter(int(v) for _, _, v in broker.consume_all(topic) if v is not None)


def _options(broker: KafkaBroker, topic: str, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "--arg", f"bootstrap={broker.bootstrap_servers}", "--arg", f"topic={topic}",
        "--arg", f"count={COUNT}", "--parallelism", "2",
        "--checkpoint-dir", f"file://{tmp_path / 'chk'}",
        "--savepoint-dir-allow", f"file://{tmp_path / 'sp'}",
        *extra,
    ]  # fmt: skip


def _kafka_clients() -> int:
    """librdkafka clients alive in this process: each runs one thread it names rdk:main."""
    names = []
    for task in Path("/proc/self/task").iterdir():
        try:
            names.append((task / "comm").read_text().strip())
        except OSError:  # the thread ended while we looked
            continue
    return names.count("rdk:main")


def _assert_exactly_once(broker: KafkaBroker, topic: str) -> None:
    # Nothing the job left open holds back read_committed consumers: the last stable offset has
    # caught up with the high watermark on every partition, without waiting for a transaction timeout.
    broker.wait_stable(topic, timeout=30)
    got = _numbers(broker, topic)
    missing = [i for i in range(COUNT) if got[i] == 0]
    duplicated = [i for i, n in got.items() if n > 1]
    assert not missing and not duplicated, f"missing {missing[:10]}…, duplicated {duplicated[:10]}…"
    assert sorted(got) == list(range(COUNT))
    assert broker.open_transactions() == []


def test_a_bounded_job_commits_its_last_transaction_with_the_final_checkpoint(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = kafka_broker.create_topic(unique_topic("eos"), 3)
    # With an hourly interval the only checkpoint is the final one (FLIP-147): it alone commits.
    done = run_thread_job(
        PIPELINE,
        *_options(kafka_broker, topic, tmp_path, "--checkpoint-interval", "1h", "--arg", "rate=20000"),
    )
    assert done.returncode == 0, done.stderr
    _assert_exactly_once(kafka_broker, topic)


def test_taskmanager_killed_mid_run_gives_each_record_once(kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    topic = kafka_broker.create_topic(unique_topic("eos-kill"), 3)
    job = SluiceJob(
        PIPELINE,
        *_options(kafka_broker, topic, tmp_path, "--checkpoint-interval", "300ms", "--restart-delay", "100ms",
                  "--arg", "rate=3000"),
    )  # fmt: skip
    try:
        job.wait_checkpoints(3)
        os.kill(job.taskmanager_pids()[1], signal.SIGKILL)
        job.wait_until(lambda: job.get("/v1/job")["restarts"] >= 1, 60, "the restart")
        assert job.wait(180) == 0, job.stderr
    finally:
        job.kill()
    _assert_exactly_once(kafka_broker, topic)


def test_stop_with_savepoint_then_resume_gives_each_record_once(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = kafka_broker.create_topic(unique_topic("eos-stop"), 2)
    options = _options(kafka_broker, topic, tmp_path, "--checkpoint-interval", "300ms")
    job = ThreadJob(PIPELINE, *options, "--arg", f"rate={_STOPPED_RATE}")
    try:
        job.wait_checkpoints(3)
        savepoint = stop_with_savepoint(job, tmp_path / "sp")
    finally:
        job.kill()
    first = _numbers(kafka_broker, topic)
    assert 0 < len(first) < COUNT and max(first.values()) == 1, "the stop came mid-run, each record once"
    resumed = run_thread_job(PIPELINE, *options, "--from-savepoint", savepoint, "--arg", "rate=20000")
    assert resumed.returncode == 0, resumed.stderr
    _assert_exactly_once(kafka_broker, topic)


def test_resuming_at_another_parallelism_gives_each_record_once(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = kafka_broker.create_topic(unique_topic("eos-rescale"), 3)
    options = _options(kafka_broker, topic, tmp_path, "--checkpoint-interval", "300ms")
    job = ThreadJob(PIPELINE, *options, "--arg", f"rate={_STOPPED_RATE}")
    try:
        job.wait_checkpoints(3)
        savepoint = stop_with_savepoint(job, tmp_path / "sp")
    finally:
        job.kill()
    assert 0 < len(_numbers(kafka_broker, topic)) < COUNT
    # --parallelism comes last and wins: the sink's committables are dealt over three subtasks.
    resumed = run_thread_job(
        PIPELINE, *options, "--from-savepoint", savepoint, "--parallelism", "3", "--arg", "rate=20000"
    )
    assert resumed.returncode == 0, resumed.stderr
    parallelisms = {operator(load(m), "kafka")["parallelism"] for m in metadata_files(tmp_path / "chk")}
    assert parallelisms == {2, 3}
    _assert_exactly_once(kafka_broker, topic)


def test_at_least_once_delivers_every_record(kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    topic = kafka_broker.create_topic(unique_topic("alo"), 2)
    done = run_thread_job(
        PIPELINE,
        *_options(kafka_broker, topic, tmp_path, "--checkpoint-interval", "200ms",
                  "--arg", "rate=20000", "--arg", "delivery=at-least-once"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = _numbers(kafka_broker, topic)
    # Without a failure nothing is repeated either; the guarantee under failures is "at least".
    assert sorted(got) == list(range(COUNT)) and max(got.values()) == 1
    assert kafka_broker.open_transactions() == []


def test_at_least_once_fails_the_checkpoint_when_the_broker_refuses_a_record(
    kafka_broker: KafkaBroker,
) -> None:
    """Only failed deliveries call back into Python (`delivery.report.only.error`): a record the broker
    refuses, here one larger than the topic's `max.message.bytes`, still fails the checkpoint's flush."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    topic = kafka_broker.create_topic(unique_topic("alo-refused"), 1)
    entry = ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    kafka_broker.admin().incremental_alter_configs([resource])[resource].result(30)
    sink = KafkaSink(kafka_broker.bootstrap_servers, topic, delivery="at-least-once")
    assert isinstance(sink, KafkaAtLeastOnceSink)
    before = _kafka_clients()
    writer = sink.create_writer(0, 1)
    try:
        writer.write([b"small"], None)
        writer.flush()
        writer.write([b"x" * 10_000], None)
        with pytest.raises(RuntimeError, match=f"delivery to {topic} failed: .*(too large|TOO_LARGE)"):
            writer.flush()
    finally:
        writer.close()
    # Closed, not left to the garbage collector (its callbacks are the writer's methods: a cycle).
    assert _kafka_clients() == before
    assert [v for _, _, v in kafka_broker.consume_all(topic)] == [b"small"]


def test_a_job_in_the_test_process_leaves_no_kafka_producer_behind(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    """A TaskManager thread closes its sink's producers when it ends, as a TaskManager process's exit
    does: a test run (or a reused Spark Python worker) would otherwise keep their threads and
    connections, one set per subtask and job."""
    topic = kafka_broker.create_topic(unique_topic("eos-close"), 2)
    before = _kafka_clients()
    done = run_thread_job(
        PIPELINE,
        *_options(kafka_broker, topic, tmp_path, "--checkpoint-interval", "200ms", "--arg", "rate=20000"),
    )
    assert done.returncode == 0, done.stderr
    assert _kafka_clients() == before
    _assert_exactly_once(kafka_broker, topic)
