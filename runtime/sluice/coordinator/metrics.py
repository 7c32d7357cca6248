"""Rates and gauges of a job's subtasks and vertices, from the samples TaskManagers send in heartbeats.

A TaskManager sends cumulative figures per subtask (`sluice.engine.context.Metrics`): records in and
out, nanoseconds the subtask has existed, spent idle (waiting for input) and backpressured (waiting for
room downstream), plus gauges (input watermark, input queue fill). `MetricsHistory` keeps each
subtask's samples of the last `window_s` seconds and turns the first and last of them into per-second
figures with Flink's names and definitions:

- `recordsInPerSecond`, `recordsOutPerSecond`;
- `idleTimeMsPerSecond`, `backPressuredTimeMsPerSecond`, and `busyTimeMsPerSecond`, the rest of each
  second (the three add up to 1000);
- `inputWatermark`: the subtask's input watermark itself (ms of event time), as Flink's web UI shows it;
- `watermarkLagMs`: the wall clock minus the subtask's input watermark (meaningful when event time is
  wall-clock time, as in Flink), `inputQueueUsage`: queued events over the queues' capacity (0..1).

Time differences use the TaskManager's own clock (the `timeNs` of each sample), so heartbeats that are
late or bunched up do not distort the rates. A vertex shows the sum of its subtasks' record rates and
the worst subtask's time, lag and queue figures, as Flink's web UI does for backpressure, and the lowest
input watermark of its subtasks, as Flink's does for watermarks.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

from sluice.engine.events import MAX_WATERMARK

WINDOW_S = 5.0
_COUNTERS = ("recordsIn", "recordsOut", "timeNs", "idleNs", "backpressuredNs")
RATE_FIELDS = (
    "recordsInPerSecond",
    "recordsOutPerSecond",
    "busyTimeMsPerSecond",
    "backPressuredTimeMsPerSecond",
    "idleTimeMsPerSecond",
)
GAUGE_FIELDS = ("watermarkLagMs", "inputQueueUsage")
_WORST = ("busyTimeMsPerSecond", "backPressuredTimeMsPerSecond", "idleTimeMsPerSecond", *GAUGE_FIELDS)


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


class MetricsHistory:
    """The recent samples of every subtask (key `"<vertex>:<subtask>"`, as heartbeats name them)."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self._window_ns = int(window_s * 1e9)
        self._samples: dict[str, deque[Mapping[str, Any]]] = {}

    def ingest(self, current: Mapping[str, Mapping[str, Any]]) -> None:
        """Takes the latest sample of every subtask (the job master's `metrics`); cheap to call often."""
        for key, sample in current.items():
            if not all(_number(sample.get(c)) for c in _COUNTERS):
                continue  # a TaskManager of an older version: counts only, no rates
            samples = self._samples.setdefault(key, deque())
            if samples:
                last = samples[-1]
                if sample["timeNs"] == last["timeNs"]:
                    continue  # the same heartbeat, or a subtask that ended and stopped its clock
                if any(sample[c] < last[c] for c in _COUNTERS):
                    samples.clear()  # a new attempt: its subtasks count from zero again
            samples.append(sample)
            # Keep one sample at least `window` old, so the rate spans the whole window.
            while len(samples) > 2 and sample["timeNs"] - samples[1]["timeNs"] >= self._window_ns:
                samples.popleft()

    def subtask(self, key: str, finished: bool, now_ms: int | None = None) -> dict[str, float | None]:
        """Rates and gauges of one subtask; None where not known yet (fewer than two samples)."""
        out: dict[str, float | None] = dict.fromkeys((*RATE_FIELDS, *GAUGE_FIELDS))
        samples = self._samples.get(key)
        if not samples:
            return out
        last = samples[-1]
        if finished:
            # A finished subtask does nothing, whatever its last window held.
            out.update(dict.fromkeys(RATE_FIELDS, 0.0))
            return out
        first = samples[0]
        elapsed = last["timeNs"] - first["timeNs"]
        if elapsed > 0:
            per_s = 1e9 / elapsed
            idle = min(1000.0, (last["idleNs"] - first["idleNs"]) / elapsed * 1000)
            pressured = min(
                1000.0 - idle, (last["backpressuredNs"] - first["backpressuredNs"]) / elapsed * 1000
            )
            out.update(
                recordsInPerSecond=(last["recordsIn"] - first["recordsIn"]) * per_s,
                recordsOutPerSecond=(last["recordsOut"] - first["recordsOut"]) * per_s,
                idleTimeMsPerSecond=idle,
                backPressuredTimeMsPerSecond=pressured,
                busyTimeMsPerSecond=1000.0 - idle - pressured,
            )
        watermark = last.get("inputWatermark")
        if _number(watermark) and watermark != MAX_WATERMARK:
            now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
            out["watermarkLagMs"] = float(max(0, now - watermark))
            out["inputWatermark"] = float(watermark)
        queued, capacity = last.get("inputQueueLength"), last.get("inputQueueCapacity")
        if _number(queued) and _number(capacity) and capacity > 0:
            out["inputQueueUsage"] = min(1.0, queued / capacity)
        return out


def vertex_figures(subtasks: Iterable[Mapping[str, Any]]) -> dict[str, float | None]:
    """A vertex's figures from its subtasks' (each a `MetricsHistory.subtask` result)."""
    figures = list(subtasks)
    out: dict[str, float | None] = {}
    for name in ("recordsInPerSecond", "recordsOutPerSecond"):
        known = [f[name] for f in figures if f.get(name) is not None]
        out[name] = sum(known) if known else None
    for name in _WORST:
        known = [f[name] for f in figures if f.get(name) is not None]
        out[name] = max(known) if known else None
    watermarks = [f["inputWatermark"] for f in figures if f.get("inputWatermark") is not None]
    out["inputWatermark"] = min(watermarks) if watermarks else None
    return out
