"""KafkaSink with delivery='at-least-once': an idempotent producer flushed at every checkpoint."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sluice.connectors.base import Sink, SinkWriter
from sluice.connectors.kafka._common import check_format, encode, encode_key
from sluice.connectors.kafka._packed import Encoded

log = logging.getLogger(__name__)

_TIMEOUT_S = 60.0


class KafkaSinkBase:
    """What both delivery modes share: the topic, value format, keys and client properties."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        value_format: str,
        key: Callable[[Any], Any] | None,
        properties: dict[str, str] | None,
    ) -> None:
        check_format(value_format, "KafkaSink")
        self.bootstrap_servers, self.topic, self.value_format = bootstrap_servers, topic, value_format
        self.key, self.properties = key, dict(properties or {})

    def _config(self, **extra: Any) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap_servers, **self.properties, **extra}

    def _encoded(self, values: list[Any], timestamps: list[int] | None) -> Encoded:
        if timestamps is not None and len(timestamps) != len(values):
            raise ValueError(f"KafkaSink: {len(values)} records came with {len(timestamps)} timestamps")
        fmt, key = self.value_format, self.key
        return Encoded(
            [encode_key(key(v)) for v in values] if key is not None else None,
            [encode(v, fmt) for v in values],
            list(timestamps) if timestamps is not None else None,
        )


class KafkaAtLeastOnceSink(KafkaSinkBase, Sink):
    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        return _AtLeastOnceWriter(self)


class _AtLeastOnceWriter(SinkWriter):
    def __init__(self, sink: KafkaAtLeastOnceSink) -> None:
        from confluent_kafka import Producer

        self.sink = sink
        self.errors: list[str] = []
        self.producer = Producer(
            sink._config(
                **{
                    "enable.idempotence": True,
                    "error_cb": self._error,
                    # Only failed deliveries call back into Python: a call per delivered record cost
                    # more TaskManager CPU than the exactly-once sink's transactions (W5).
                    "on_delivery": self._delivered,
                    "delivery.report.only.error": True,
                }
            )
        )

    def _error(self, err: Any) -> None:
        if err.fatal():
            self.errors.append(str(err))

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))

    def write(self, values: list[Any], timestamps: list[int] | None) -> None:
        producer, topic = self.producer, self.sink.topic
        for key, value, stamp in self.sink._encoded(values, timestamps).rows():
            while True:
                try:
                    producer.produce(topic, value, key, timestamp=stamp or 0)
                    break
                except BufferError:
                    producer.poll(0.1)
        producer.poll(0)
        self._raise()

    def flush(self) -> None:
        # At a checkpoint every record written before it is acknowledged by the broker, so a restore
        # from that checkpoint may repeat records but never lose one.
        left = self.producer.flush(_TIMEOUT_S)
        self._raise()
        if left:
            raise RuntimeError(
                f"KafkaSink: {left} records not delivered to {self.sink.topic} within {_TIMEOUT_S}s"
            )

    def _raise(self) -> None:
        if self.errors:
            raise RuntimeError(f"KafkaSink: delivery to {self.sink.topic} failed: {self.errors[0]}")

    def close(self) -> None:
        # The producer's callbacks are this writer's methods, a cycle only the garbage collector would
        # break: until then a TaskManager thread of a longer-lived process (sluice.testing, a reused
        # Spark Python worker) keeps its librdkafka threads and broker connections. Close it now.
        self.producer.flush(5)
        try:
            self.producer.close()
        except Exception as err:  # a sink that ends must not fail its TaskManager's end
            log.warning("KafkaSink: could not close a producer: %s", err)
