"""A real Apache Kafka 4 broker for tests: one KRaft node (broker and controller) on loopback ports.

The jars come from Maven Central through ``scripts/kafka-jars.sh`` (cached under ``.cache/kafka/``). The
node's storage is formatted with ``kafka.tools.StorageTool`` and the server runs as ``kafka.Kafka
server.properties`` under Java 17, listening on 127.0.0.1 only (or on the one address it is given), in a
temporary directory deleted at the end. Internal topics have one partition and one replica so the first
transactional producer and the first consumer group do not wait for fifty partitions to be created.
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from testkit._kafka_transactions import list_transactions
from testkit.jobs import REPO
from testkit.ports import free_loopback_port

JARS_SCRIPT = REPO / "scripts" / "kafka-jars.sh"
READY_TIMEOUT_S = 90.0
# The states of a transaction that holds back the last stable offset of the partitions it wrote to.
_OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort")

_LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.kafka.name = kafka
logger.kafka.level = WARN
logger.apache.name = org.apache.kafka
logger.apache.level = WARN
"""


def kafka_libs() -> Path:
    """The jar directory; fails (rather than download for minutes inside a test) when it is missing."""
    done = subprocess.run([str(JARS_SCRIPT), "--check"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"Kafka jars missing: run scripts/kafka-jars.sh first\n{done.stderr}")
    return Path(done.stdout.strip())


def kafka_cluster_id() -> str:
    """A random cluster id in Kafka's form (a UUID in URL-safe base64). One in 64 of those starts with
    "-", which StorageTool's argument parser reads as an option ("--cluster-id: expected one
    argument"): drawn again, as Kafka's own `Uuid.randomUuid` does."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


@dataclass
class KafkaBroker:
    libs: Path
    base_dir: Path
    port: int = field(default_factory=free_loopback_port)
    controller_port: int = field(default_factory=free_loopback_port)
    host: str = "127.0.0.1"
    """The address it listens on and advertises."""
    launcher: tuple[str, ...] = ()
    """A command the server runs under, such as nsenter into a network namespace that has `host`."""
    process: subprocess.Popen[bytes] | None = None
    _admin: AdminClient | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.base_dir / "broker.log"

    def _java(self, main: str, *args: str) -> list[str]:
        java = shutil.which("java") or "java"
        return [
            java, "-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.base_dir / 'log4j2.properties'}",
            "-cp", f"{self.libs}/*", main, *args,
        ]  # fmt: skip

    def start(self) -> None:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{self.host}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.base_dir / "data"),
            "auto.create.topics.enable": "false",
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # Tests look at what a killed producer leaves open; the broker aborts it after its timeout.
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
        }
        (self.base_dir / "log4j2.properties").write_text(_LOG4J2)
        config = self.base_dir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        cluster_id = kafka_cluster_id()
        fmt = subprocess.run(
            self._java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)),
            capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        if fmt.returncode != 0:
            raise RuntimeError(f"kafka StorageTool format failed:\n{fmt.stdout}{fmt.stderr}")
        with self.log_file.open("wb") as log:
            self.process = subprocess.Popen(
                [*self.launcher, *self._java("kafka.Kafka", str(config))],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"the Kafka broker exited ({self.process.returncode}):\n{self.log()}")
            try:
                # A client would log every refused connection; the port answers before metadata does.
                socket.create_connection((self.host, self.port), timeout=1).close()
                metadata = self.admin().list_topics(timeout=2)
                if metadata.brokers:
                    return
            except (OSError, KafkaException):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the Kafka broker was not ready after {READY_TIMEOUT_S}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_file.read_text(errors="replace")[-5000:] if self.log_file.exists() else ""

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

    # --- helpers -------------------------------------------------------------------------------------

    def admin(self) -> AdminClient:
        # One client for the broker's life: futures of a client that is garbage collected fail.
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        return self._admin

    def create_topic(self, name: str, partitions: int = 1) -> str:
        futures = self.admin().create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1)]
        )
        futures[name].result(30)
        self._wait_partitions(name, partitions)
        return name

    def add_partitions(self, name: str, total: int) -> None:
        self.admin().create_partitions([NewPartitions(name, total)])[name].result(30)
        self._wait_partitions(name, total)

    def _wait_partitions(self, name: str, count: int) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            topic = self.admin().list_topics(name, timeout=5).topics.get(name)
            if topic is not None and topic.error is None and len(topic.partitions) == count:
                return
            time.sleep(0.1)
        raise AssertionError(f"topic {name} did not get {count} partitions")

    def produce(
        self,
        topic: str,
        values: Iterable[bytes | str],
        partition: int | None = None,
        timestamps: Iterable[int] | None = None,
    ) -> None:
        # Idempotence keeps the order of the values in a partition even when a batch is retried (right
        # after a topic is created its leader may not be known yet), so tests may expect offsets.
        producer = Producer(
            {"bootstrap.servers": self.bootstrap_servers, "linger.ms": 5, "enable.idempotence": True}
        )
        stamps = iter(timestamps) if timestamps is not None else None
        for value in values:
            kwargs: dict[str, Any] = {}
            if partition is not None:
                kwargs["partition"] = partition
            if stamps is not None:
                kwargs["timestamp"] = next(stamps)
            while True:
                try:
                    producer.produce(topic, value, **kwargs)
                    break
                except BufferError:  # the local queue (100,000 records) is full: let it drain
                    producer.poll(0.1)
            producer.poll(0)
        if producer.flush(30) != 0:
            raise AssertionError(f"could not deliver every record to {topic}")

    def end_offsets(self, topic: str, read_committed: bool = True) -> dict[int, int]:
        """Per partition: the high watermark, or with `read_committed` the last stable offset."""
        consumer = self.consumer(read_committed)
        try:
            parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10, False)[1] for p in parts}
        finally:
            consumer.close()

    def wait_stable(self, topic: str, timeout: float = 30) -> dict[int, int]:
        """Waits until no open transaction holds back `topic` (the last stable offset of every partition
        is its high watermark: commit and abort markers are written after the producer's call returns)
        and returns those offsets."""
        deadline = time.monotonic() + timeout
        while True:
            stable, high = self.end_offsets(topic), self.end_offsets(topic, read_committed=False)
            if stable == high:
                return stable
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: last stable offsets {stable} stay behind {high}")
            time.sleep(0.1)

    def consumer(self, read_committed: bool = True, group: str | None = None) -> Consumer:
        """A consumer that commits nothing itself, in consumer group `group` (a fresh one if None)."""
        return Consumer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "group.id": group or f"testkit-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed" if read_committed else "read_uncommitted",
            }
        )

    def consume_all(self, topic: str, timeout: float = 60) -> list[tuple[int, int, bytes | None]]:
        """Every committed record of `topic` as (partition, offset, value), read up to the last stable
        offset of each partition as it is when called; fails if that is not reached within `timeout`."""
        ends = self.end_offsets(topic, read_committed=True)
        consumer = self.consumer(True)
        records: list[tuple[int, int, bytes | None]] = []
        try:
            consumer.assign([TopicPartition(topic, p, 0) for p in ends])
            deadline = time.monotonic() + timeout
            while True:
                positions = {tp.partition: tp.offset for tp in consumer.position(
                    [TopicPartition(topic, p) for p in ends])}  # fmt: skip
                if all(positions[p] >= end or end == 0 for p, end in ends.items()):
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(f"{topic}: read up to {positions}, expected {ends}")
                for message in consumer.consume(500, 0.2):
                    partition, offset = message.partition(), message.offset()
                    # A message without an error always has both; the stubs cannot say so.
                    if message.error() is None and partition is not None and offset is not None:
                        records.append((partition, offset, message.value()))
        finally:
            consumer.close()
        return records

    def open_transactions(self) -> list[str]:
        """Transactional ids whose transaction is still open on the broker (it holds back the last stable
        offset, so read_committed consumers see nothing after it). The Python client cannot list
        transactions: this sends the broker the ListTransactions request of Kafka's TransactionsCommand,
        without starting that command's JVM."""
        transactions = list_transactions(self.host, self.port)
        return sorted(name for name, _, state in transactions if state in _OPEN_STATES)


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    """A Kafka 4 broker for the whole session; stopped and its directory deleted at the end."""
    try:
        libs = kafka_libs()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    base_dir = Path(tempfile.mkdtemp(prefix="sluice-kafka-"))
    broker = KafkaBroker(libs=libs, base_dir=base_dir)
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()
        shutil.rmtree(base_dir, ignore_errors=True)


def unique_topic(prefix: str = "t") -> str:
    return f"{prefix}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
