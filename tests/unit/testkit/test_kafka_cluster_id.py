"""The test broker's cluster id: never one that Kafka's StorageTool reads as an option.

A session's broker failed to format its storage when the random id began with "-" (1 in 64 draws),
and every Kafka test of that session errored.
"""

from __future__ import annotations

import uuid

import pytest

from testkit import kafka


def test_an_id_that_would_start_with_a_dash_is_drawn_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0xF8 puts 62 in the first six bits: "-" in URL-safe base64.
    draws = iter([uuid.UUID(bytes=b"\xf8" + b"\x00" * 15), uuid.UUID(bytes=b"\x10" * 16)])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(draws))
    cluster_id = kafka.kafka_cluster_id()
    assert cluster_id == "EBAQEBAQEBAQEBAQEBAQEA"
    assert len(cluster_id) == 22


def test_ids_are_random_and_never_start_with_a_dash() -> None:
    ids = {kafka.kafka_cluster_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert not [i for i in ids if i.startswith("-")]
