"""Pure helpers of the Kafka connector: value formats, client settings, split slots, transactional ids.

Nothing here talks to a broker, so all of it is unit-tested without one.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from typing import Any, Literal

from sluice.connectors.kafka import _json as json_values

ValueFormat = Literal["bytes", "str", "json"]
VALUE_FORMATS = ("bytes", "str", "json")

#: Producers are taken from a fixed pool of transactional ids per subtask, so that a restore can fence
#: (and so abort) every transaction a crashed attempt may have left open, without knowing which were.
#: One id is busy per transaction that is open or pre-committed and not yet committed: the open one
#: plus one per checkpoint whose completion has not been notified yet.
TRANSACTIONAL_ID_POOL = 8

#: The Kafka default (60 s) would abort a pre-committed transaction under a checkpoint interval of a
#: minute or more; 15 minutes is the broker's default `transaction.max.timeout.ms`.
DEFAULT_TRANSACTION_TIMEOUT_MS = 900_000

#: The header that tags the first record of a transaction, so a restore can tell whether that
#: transaction (or a re-sent copy of it) became visible.
TXN_HEADER = "sluice.txn"


def check_format(value_format: str, what: str) -> None:
    if value_format not in VALUE_FORMATS:
        raise ValueError(
            f"{what}: value_format must be one of {', '.join(VALUE_FORMATS)}, got {value_format!r}"
        )


def decode(value: bytes | None, value_format: str) -> Any:
    if value is None or value_format == "bytes":
        return value
    if value_format == "str":
        return value.decode("utf-8")
    return json_values.loads(value)


def encode(value: Any, value_format: str) -> bytes | None:
    """Bytes for Kafka. None stays None (a tombstone); `bytes` format accepts bytes and str."""
    if value is None:
        return None
    if value_format == "json":
        return json_values.dumps(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if value_format == "str":
        return str(value).encode("utf-8")
    raise TypeError(
        f"KafkaSink with value_format='bytes' needs bytes or str values, got {type(value).__name__}"
    )


def encode_key(key: Any) -> bytes | None:
    if key is None or isinstance(key, bytes):
        return key
    if isinstance(key, str):
        return key.encode("utf-8")
    if type(key) is int:  # what json.dumps writes for an int, without its cost (bool is not int here)
        return str(key).encode("ascii")
    return json.dumps(key, separators=(",", ":"), sort_keys=True).encode("utf-8")


@dataclass(frozen=True)
class KafkaRecord:
    """A record with its Kafka coordinates: what `KafkaSource(..., with_metadata=True)` emits."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None
    """Milliseconds since the epoch (create or log-append time, as the topic says), or None."""
    key: bytes | None
    value: Any


def slot_of(topic: str, partition: int, slots: int) -> int:
    """The split (slot) that owns a partition. Stable across processes and runs (crc32, not `hash`), so
    every subtask agrees which one of them picks up a partition discovered while running; consecutive
    partitions of a topic go to consecutive slots, so at the first start each slot gets its share."""
    return (zlib.crc32(topic.encode("utf-8")) + partition) % slots


def consumer_config(
    bootstrap_servers: str, group_id: str, properties: dict[str, str] | None
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap_servers,
        "group.id": group_id,
        # Offsets live in Sluice's checkpoints; the broker's committed offsets only show lag.
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # Records of aborted or still open transactions are never read (Kafka's exactly-once chain).
        "isolation.level": "read_committed",
        # librdkafka pauses fetching a partition for this long once its local queue passed
        # queued.min.messages (default 1000 ms). A source reading a backlog passes it all the time, and
        # then waited most of each second: reading 500k records took 4.8 us each at the default, 1.1 us
        # at 10 ms (W5, bench/kafka.py). A user's properties may still set it.
        "fetch.queue.backoff.ms": 10,
    }
    config.update(properties or {})
    config["enable.auto.commit"] = False
    return config


_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def default_transactional_id_prefix(job_id: str, operator_uid: str) -> str:
    """Unique per job and sink operator: two jobs, or two sinks of one job, never share ids."""
    return f"sluice-{_ID_UNSAFE.sub('_', job_id)}-{_ID_UNSAFE.sub('_', operator_uid)}"


def transactional_id(prefix: str, subtask_index: int, slot: int) -> str:
    """Slot `slot` of subtask `subtask_index`'s pool. Depends on the subtask index, not on attempts or
    checkpoints, so the next attempt of that subtask finds (and fences) exactly these ids again."""
    return f"{prefix}-{subtask_index}-{slot}"


def resend_transactional_id(prefix: str, subtask_index: int) -> str:
    """The id a subtask re-sends restored transactions with (never one of a pool's, so re-sending
    a committable written by another subtask before a rescale never races with that pool's fencing)."""
    return f"{prefix}-{subtask_index}-resend"


def free_slot(busy: set[int], pool: int = TRANSACTIONAL_ID_POOL) -> int:
    """The lowest slot not held by an open or pre-committed transaction."""
    for slot in range(pool):
        if slot not in busy:
            return slot
    raise RuntimeError(
        f"KafkaSink: all {pool} transactional ids of this subtask hold transactions waiting for their "
        "checkpoint to complete; checkpoints are failing after the sink's snapshot (see the job's "
        "checkpoint history). Restarting the job from its last checkpoint commits or aborts them."
    )
