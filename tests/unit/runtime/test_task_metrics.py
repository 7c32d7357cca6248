"""Subtask metrics: the wait clocks of the task loop, the rates the coordinator derives from heartbeat
samples (Flink's busy / backpressured / idle definitions), and the heartbeat's schema check."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from sluice.coordinator.control import TO_COORDINATOR
from sluice.coordinator.metrics import MetricsHistory, vertex_figures
from sluice.engine._task_metrics import WaitClock
from sluice.engine.channels import InputChannel, InputGate, LocalOutputChannel
from sluice.engine.context import Metrics
from sluice.engine.events import MAX_WATERMARK, Watermark
from sluice.transport.messages import MessageError, MetricsReport, decode_message, encode_message

S = 1_000_000_000


def _sample(
    t_s: float, records: int, idle_s: float, pressured_s: float, **gauges: object
) -> dict[str, object]:
    return {
        "recordsIn": records,
        "recordsOut": records * 2,
        "lateRecordsDropped": 0,
        "timeNs": int(t_s * S),
        "idleNs": int(idle_s * S),
        "backpressuredNs": int(pressured_s * S),
        **gauges,
    }


def test_a_wait_clock_counts_a_wait_in_progress_and_only_once() -> None:
    clock = WaitClock()
    clock.start()
    time.sleep(0.02)
    clock.start()  # a nested start does not restart the wait
    in_progress = clock.read(time.monotonic_ns())
    assert in_progress >= 20_000_000
    clock.stop()
    clock.stop()
    total = clock.total_ns
    assert total >= in_progress
    time.sleep(0.01)
    assert clock.read(time.monotonic_ns()) == total


def test_rates_come_from_the_first_and_last_sample_of_the_window() -> None:
    history = MetricsHistory(window_s=5)
    history.ingest({"0:0": _sample(10, 1_000, 1, 0)})
    assert history.subtask("0:0", finished=False)["recordsInPerSecond"] is None  # one sample: no rate
    history.ingest({"0:0": _sample(12, 5_000, 1.5, 1.0)})
    figures = history.subtask("0:0", finished=False)
    assert figures["recordsInPerSecond"] == pytest.approx(2_000)
    assert figures["recordsOutPerSecond"] == pytest.approx(4_000)
    assert figures["idleTimeMsPerSecond"] == pytest.approx(250)
    assert figures["backPressuredTimeMsPerSecond"] == pytest.approx(500)
    assert figures["busyTimeMsPerSecond"] == pytest.approx(250)


def test_the_window_slides_and_a_new_attempt_starts_it_afresh() -> None:
    history = MetricsHistory(window_s=5)
    for t in range(0, 21):
        # 100 records/s for 10 s, then 1,000 records/s.
        records = 100 * min(t, 10) + 1_000 * max(0, t - 10)
        history.ingest({"0:0": _sample(t, records, 0, 0)})
    assert history.subtask("0:0", finished=False)["recordsInPerSecond"] == pytest.approx(1_000)
    history.ingest({"0:0": _sample(0.5, 10, 0.5, 0)})  # counters went back: a restarted subtask
    assert history.subtask("0:0", finished=False)["recordsInPerSecond"] is None
    history.ingest({"0:0": _sample(1.5, 60, 0.5, 0)})
    assert history.subtask("0:0", finished=False)["recordsInPerSecond"] == pytest.approx(50)


def test_a_finished_subtask_has_zero_rates_and_gauges_come_from_the_last_sample() -> None:
    history = MetricsHistory()
    now_ms = 1_000_000
    history.ingest(
        {"1:0": _sample(1, 0, 0, 0, inputWatermark=now_ms - 250, inputQueueLength=3, inputQueueCapacity=8)}
    )
    history.ingest(
        {"1:0": _sample(2, 500, 0, 0, inputWatermark=now_ms - 400, inputQueueLength=6, inputQueueCapacity=8)}
    )
    running = history.subtask("1:0", finished=False, now_ms=now_ms)
    assert running["watermarkLagMs"] == 400
    assert running["inputQueueUsage"] == pytest.approx(0.75)
    finished = history.subtask("1:0", finished=True, now_ms=now_ms)
    assert finished["recordsInPerSecond"] == 0.0 and finished["busyTimeMsPerSecond"] == 0.0
    history.ingest({"1:0": _sample(3, 500, 0, 0, inputWatermark=MAX_WATERMARK)})
    assert history.subtask("1:0", finished=False, now_ms=now_ms)["watermarkLagMs"] is None


def test_a_vertex_sums_record_rates_and_shows_its_worst_subtask() -> None:
    combined = vertex_figures(
        [
            {"recordsInPerSecond": 10.0, "recordsOutPerSecond": 1.0, "backPressuredTimeMsPerSecond": 900.0},
            {"recordsInPerSecond": 30.0, "recordsOutPerSecond": None, "backPressuredTimeMsPerSecond": 100.0},
        ]
    )
    assert combined["recordsInPerSecond"] == 40.0
    assert combined["recordsOutPerSecond"] == 1.0
    assert combined["backPressuredTimeMsPerSecond"] == 900.0
    assert combined["watermarkLagMs"] is None


def test_a_send_into_a_full_local_channel_counts_as_backpressure_one_with_room_does_not() -> None:
    async def scenario() -> tuple[int, int]:
        target = InputChannel(0, 0, capacity=1)
        gate = InputGate([target])
        sender = LocalOutputChannel(target)
        clock = sender.clock = WaitClock()
        await sender.send(Watermark(1))  # room: not timed
        with_room = clock.total_ns
        assert gate.fill() == (1, 1)

        async def consume_later() -> None:
            await asyncio.sleep(0.05)
            gate.poll()

        consumer = asyncio.create_task(consume_later())
        await sender.send(Watermark(2))  # full: waits for the consumer
        await consumer
        return with_room, clock.total_ns

    with_room, after_full = asyncio.run(scenario())
    assert with_room == 0
    assert after_full >= 40_000_000


def test_the_heartbeat_sample_of_a_subtask() -> None:
    metrics = Metrics()
    metrics.records_in = 7
    metrics.probe = lambda: (123, 2, 16)
    sample = metrics.as_dict()
    assert sample["recordsIn"] == 7
    assert (sample["inputWatermark"], sample["inputQueueLength"], sample["inputQueueCapacity"]) == (
        123,
        2,
        16,
    )
    metrics.ended()
    frozen = metrics.as_dict()["timeNs"]
    time.sleep(0.01)
    assert metrics.as_dict()["timeNs"] == frozen  # a finished subtask's clock stands still


def test_heartbeat_metrics_are_checked_like_every_control_message() -> None:
    good = MetricsReport(0, {"0:1": dict(Metrics().as_dict())})
    assert decode_message(encode_message(good), TO_COORDINATOR) == good
    malformed: list[dict[str, Any]] = [
        {"zero": {}},
        {"0:x": {}},
        {"0:1": [1]},
        {"0:1": {"recordsIn": "7"}},
        {"0:1": {"recordsIn": True}},
    ]
    for bad in malformed:
        with pytest.raises(MessageError):
            decode_message(json.dumps({"type": "metrics", "tm": 0, "metrics": bad}).encode(), TO_COORDINATOR)
    with pytest.raises(MessageError, match="not a number"):
        decode_message(b'{"type":"metrics","tm":0,"metrics":{"0:1":{"idleNs":NaN}}}', TO_COORDINATOR)


def test_the_queue_fill_a_heartbeat_samples_is_the_fullest_since_the_previous_sample() -> None:
    async def scenario() -> list[tuple[int, int]]:
        channel = InputChannel(0, 0, capacity=2)
        gate = InputGate([channel])
        await channel.put(Watermark(1))
        await channel.put(Watermark(2))
        gate.poll()  # the task takes one to work on: one place free at the moment of the sample
        samples = [gate.fill()]
        samples.append(gate.fill())  # nothing queued since: what is there now
        gate.poll()
        samples.append(gate.fill())
        return samples

    assert asyncio.run(scenario()) == [(2, 2), (1, 2), (1, 2)]
