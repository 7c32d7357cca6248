"""KafkaSource against a real Kafka 4 broker, the jobs in the test process with TaskManagers on threads
(`ThreadJob`); the TaskManager killed by SIGKILL is a real `sluice run` with TaskManager processes.

Output goes through FileSink (exactly once), so "no loss, no duplicates" is checked end to end: every
produced record shows up as exactly one [partition, offset, value] line.
"""

from __future__ import annotations

import collections
import json
import os
import signal
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from testkit.inprocess import ThreadJob, run_thread_job
from testkit.jobs import RestJob, SluiceJob, run_cli
from testkit.kafka import KafkaBroker, unique_topic
from testkit.outputs import read_output

pytestmark = pytest.mark.kafka
PIPELINES = Path(__file__).parent / "pipelines"


def _fill(broker: KafkaBroker, partitions: int, per_partition: int) -> tuple[str, collections.Counter[str]]:
    """A topic with `per_partition` records in each partition, and the lines FileSink should hold."""
    topic = broker.create_topic(unique_topic("src"), partitions)
    expected: collections.Counter[str] = collections.Counter()
    for p in range(partitions):
        values = [f"p{p}-{i}" for i in range(per_partition)]
        broker.produce(topic, values, partition=p)
        expected.update(json.dumps([p, i, v]) for i, v in enumerate(values))
    return topic, expected


def _options(broker: KafkaBroker, topic: str, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "--arg", f"bootstrap={broker.bootstrap_servers}", "--arg", f"topic={topic}",
        "--arg", f"out={tmp_path / 'out'}", "--checkpoint-dir", f"file://{tmp_path / 'chk'}",
        "--savepoint-dir-allow", f"file://{tmp_path / 'sp'}", *extra,
    ]  # fmt: skip


def stop_with_savepoint(job: RestJob, savepoints: Path, *flags: str) -> str:
    """Stops the job through the CLI (`--drain` for TERMINATE) and returns the savepoint's path."""
    stop = run_cli("stop", "--address", job.rest_url(), *flags, "--savepoint-dir", f"file://{savepoints}")
    assert stop.returncode == 0, stop.stderr + job.stderr
    assert job.wait(60) == 0, job.stderr
    return stop.stdout.strip().splitlines()[-1]


def test_bounded_read_equals_what_was_produced(kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    topic, expected = _fill(kafka_broker, partitions=3, per_partition=700)
    # Records produced after the job started are not part of a bounded read.
    done = run_thread_job(
        PIPELINES / "kafka_to_files.py",
        *_options(kafka_broker, topic, tmp_path, "--parallelism", "2", "--checkpoint-interval", "1h"),
    )
    assert done.returncode == 0, done.stderr
    assert read_output(str(tmp_path / "out")) == expected


def test_offsets_come_back_from_the_checkpoint_after_a_taskmanager_is_killed(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic, expected = _fill(kafka_broker, partitions=2, per_partition=6000)
    job = SluiceJob(
        PIPELINES / "kafka_to_files.py",
        *_options(kafka_broker, topic, tmp_path, "--parallelism", "2", "--checkpoint-interval", "300ms",
                  "--restart-delay", "100ms", "--arg", "rate=2000"),
    )  # fmt: skip
    try:
        job.wait_checkpoints(2)
        os.kill(job.taskmanager_pids()[1], signal.SIGKILL)
        job.wait_until(lambda: job.get("/v1/job")["restarts"] >= 1, 60, "the restart")
        assert job.wait(180) == 0, job.stderr
    finally:
        job.kill()
    got = read_output(str(tmp_path / "out"))
    assert got == expected, f"missing {len(expected - got)}, duplicated {sum((got - expected).values())}"


def test_restore_at_another_parallelism_deals_the_partitions_anew(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic, expected = _fill(kafka_broker, partitions=3, per_partition=3000)
    sp = tmp_path / "sp"
    options = _options(kafka_broker, topic, tmp_path, "--checkpoint-interval", "300ms")
    # 9,000 records at 500 a second last 18 s: the stop (a CLI process of its own) comes before the end
    # even at load average 50-70, where at 1,500 a second the job once ended first.
    job = ThreadJob(PIPELINES / "kafka_to_files.py", *options, "--parallelism", "3", "--arg", "rate=500")
    try:
        job.wait_checkpoints(2)
        savepoint = stop_with_savepoint(job, sp)
    finally:
        job.kill()
    first = read_output(str(tmp_path / "out"))
    assert 0 < sum(first.values()) < sum(expected.values()), "the stop came in the middle of the read"
    resumed = run_thread_job(
        PIPELINES / "kafka_to_files.py", *options, "--parallelism", "2", "--from-savepoint", savepoint
    )
    assert resumed.returncode == 0, resumed.stderr
    assert read_output(str(tmp_path / "out")) == expected


def test_a_partition_added_while_running_is_read(kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    topic, expected = _fill(kafka_broker, partitions=1, per_partition=50)
    out = str(tmp_path / "out")
    job = ThreadJob(
        PIPELINES / "kafka_to_files.py",
        *_options(kafka_broker, topic, tmp_path, "--checkpoint-interval", "200ms",
                  "--arg", "bounded=0", "--arg", "discovery_ms=200"),
    )  # fmt: skip
    try:
        job.wait_until(lambda: read_output(out) == expected, 60, "the first partition's records")
        kafka_broker.add_partitions(topic, 2)
        kafka_broker.produce(topic, [f"new-{i}" for i in range(20)], partition=1)
        expected.update(json.dumps([1, i, f"new-{i}"]) for i in range(20))
        job.wait_until(lambda: read_output(out) == expected, 60, "the new partition's records")
        stop_with_savepoint(job, tmp_path / "sp", "--drain")
    finally:
        job.kill()
    assert read_output(out) == expected


def test_an_unbounded_source_with_fewer_splits_than_partitions_reads_them_all(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic, expected = _fill(kafka_broker, partitions=4, per_partition=40)
    out = str(tmp_path / "out")
    job = ThreadJob(
        PIPELINES / "kafka_to_files.py",
        *_options(kafka_broker, topic, tmp_path, "--checkpoint-interval", "200ms", "--parallelism", "2",
                  "--arg", "bounded=0", "--arg", "splits=2"),
    )  # fmt: skip
    try:
        job.wait_until(lambda: read_output(out) == expected, 60, "every partition's records")
        stop_with_savepoint(job, tmp_path / "sp", "--drain")
    finally:
        job.kill()
    assert read_output(out) == expected


def test_the_group_offsets_follow_checkpoints_and_a_new_job_can_start_from_them(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic, expected = _fill(kafka_broker, partitions=2, per_partition=30)
    group = unique_topic("group")
    first = tmp_path / "first"
    job = ThreadJob(
        PIPELINES / "kafka_to_files.py",
        *_options(kafka_broker, topic, first, "--checkpoint-interval", "200ms", "--parallelism", "2",
                  "--arg", "bounded=0", "--arg", f"group={group}"),
    )  # fmt: skip
    consumer = kafka_broker.consumer(group=group)
    try:
        job.wait_until(lambda: read_output(str(first / "out")) == expected, 60, "the records")
        # Lag as a monitoring tool sees it: the group's offsets reach the end, a checkpoint behind.
        parts = [TopicPartition(topic, p) for p in range(2)]
        job.wait_until(
            lambda: [tp.offset for tp in consumer.committed(parts, 10)] == [30, 30], 30, "committed offsets"
        )
        stop_with_savepoint(job, first / "sp")
    finally:
        consumer.close()
        job.kill()
    for p in range(2):
        kafka_broker.produce(topic, [f"after-{p}-{i}" for i in range(5)], partition=p)
    later = collections.Counter(json.dumps([p, 30 + i, f"after-{p}-{i}"]) for p in range(2) for i in range(5))
    done = run_thread_job(
        PIPELINES / "kafka_to_files.py",
        *_options(kafka_broker, topic, tmp_path / "second", "--checkpoint-interval", "1h",
                  "--arg", f"group={group}", "--arg", "starting=committed"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert read_output(str(tmp_path / "second" / "out")) == later


def test_event_time_comes_from_kafka_timestamps(kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    topic = kafka_broker.create_topic(unique_topic("ts"), 2)
    base = 1_700_000_000_000
    # Produced out of event-time order on purpose: the windows follow the timestamps, not arrival.
    stamps = [base + (i * 7919) % 5000 for i in range(400)]
    values = [f"k{i % 3}" for i in range(400)]
    for p in range(2):
        kafka_broker.produce(topic, values[p::2], partition=p, timestamps=stamps[p::2])
    expected: collections.Counter[str] = collections.Counter()
    counts = collections.Counter((v, t // 1000 * 1000) for v, t in zip(values, stamps, strict=True))
    expected.update(json.dumps([v, w, n]) for (v, w), n in counts.items())
    done = run_thread_job(
        PIPELINES / "kafka_windows.py",
        *_options(kafka_broker, topic, tmp_path, "--parallelism", "2", "--checkpoint-interval", "1h"),
    )
    assert done.returncode == 0, done.stderr
    assert read_output(str(tmp_path / "out")) == expected


def test_a_bounded_and_an_unbounded_kafka_source_go_through_partially_finished_checkpoints(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    finite, expected = _fill(kafka_broker, partitions=2, per_partition=100)
    endless = kafka_broker.create_topic(unique_topic("endless"), 1)
    expected = collections.Counter({json.dumps([finite, *json.loads(k)]): n for k, n in expected.items()})
    out = str(tmp_path / "out")
    job = ThreadJob(
        PIPELINES / "kafka_bounded_and_unbounded.py",
        "--arg", f"bootstrap={kafka_broker.bootstrap_servers}", "--arg", f"bounded_topic={finite}",
        "--arg", f"topic={endless}", "--arg", f"out={out}", "--parallelism", "2",
        "--checkpoint-dir", f"file://{tmp_path / 'chk'}", "--checkpoint-interval", "200ms",
        "--savepoint-dir-allow", f"file://{tmp_path / 'sp'}",
    )  # fmt: skip
    try:
        # The bounded source's subtasks finish while the rest runs on, and checkpoints go on
        # completing (FLIP-147): the bounded topic's records are committed by them.
        job.wait_until(
            lambda: job.get("/v1/job")["subtasks"]["finished"] >= 2, 60, "the bounded side to finish"
        )
        finished_at = job.completed_checkpoints()
        job.wait_checkpoints(finished_at + 2)
        job.wait_until(lambda: read_output(out) == expected, 30, "the bounded topic's records")
        kafka_broker.produce(endless, [f"later-{i}" for i in range(30)], partition=0)
        expected.update(json.dumps([endless, 0, i, f"later-{i}"]) for i in range(30))
        job.wait_until(lambda: read_output(out) == expected, 60, "the unbounded topic's records")
        assert job.get("/v1/job")["state"] == "RUNNING"
        stop_with_savepoint(job, tmp_path / "sp", "--drain")
    finally:
        job.kill()
    assert read_output(out) == expected


def _windows(values_and_stamps: list[tuple[str, int]]) -> collections.Counter[str]:
    counts = collections.Counter((v, t // 1000 * 1000) for v, t in values_and_stamps)
    return collections.Counter(json.dumps([v, w, n]) for (v, w), n in counts.items())


def test_one_subtask_reading_several_partitions_drops_nothing_as_late(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    # Both partitions cover the same 15 s of event time and one subtask reads them. One watermark over
    # the records as the subtask gets them (max out-of-orderness 0) would run ahead with whichever
    # partition it read more of and drop the other's records as late; a watermark per partition waits
    # for the one behind.
    topic = kafka_broker.create_topic(unique_topic("apart"), 2)
    base = 1_700_000_000_000
    rows = {p: [(f"k{i % 3}", base + i * 5) for i in range(3000)] for p in range(2)}
    for p, records in rows.items():
        kafka_broker.produce(topic, [v for v, _ in records], partition=p, timestamps=[t for _, t in records])
    done = run_thread_job(
        PIPELINES / "kafka_partition_time.py",
        *_options(kafka_broker, topic, tmp_path, "--parallelism", "1", "--checkpoint-interval", "1h"),
    )
    assert done.returncode == 0, done.stderr
    assert read_output(str(tmp_path / "out")) == _windows(rows[0] + rows[1])


def test_an_idle_partition_stops_holding_back_the_windows_of_the_busy_one(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    # Partition 1 never gets a record. Without idleness its watermark would stay at the minimum and no
    # window would fire while the job runs; with idleness_ms it stops counting after 300 ms.
    topic = kafka_broker.create_topic(unique_topic("idle"), 2)
    base = 1_700_000_000_000
    busy = [(f"k{i % 2}", base + i * 10) for i in range(400)]  # 4 s of event time
    kafka_broker.produce(topic, [v for v, _ in busy], partition=0, timestamps=[t for _, t in busy])
    out = str(tmp_path / "out")
    job = ThreadJob(
        PIPELINES / "kafka_partition_time.py",
        *_options(kafka_broker, topic, tmp_path, "--checkpoint-interval", "200ms", "--parallelism", "1",
                  "--arg", "bounded=0", "--arg", "idleness_ms=300"),
    )  # fmt: skip
    fired = _windows([r for r in busy if r[1] < base + 3000])  # the last record holds back window 3 s
    try:
        job.wait_until(lambda: read_output(out) == fired, 60, "the windows of the busy partition")
        assert job.get("/v1/job")["state"] == "RUNNING"
    finally:
        job.kill()
