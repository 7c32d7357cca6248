"""Per-key event-time and processing-time timers of a keyed operator.

Timers are deduplicated per (key, timestamp) and fire in timestamp order. Deletion is lazy: a deleted
timer stays in the heap and is skipped when popped, which keeps registration and deletion O(log n).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from sluice.state.keygroups import key_group_for

FireFn = Callable[[Any, int], None]


class _TimerQueue:
    __slots__ = ("_heap", "_live", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Any]] = []
        self._live: set[tuple[int, Any]] = set()
        self._seq = 0

    def register(self, key: Any, timestamp: int) -> None:
        entry = (timestamp, key)
        if entry not in self._live:
            self._live.add(entry)
            self._seq += 1
            heapq.heappush(self._heap, (timestamp, self._seq, key))

    def delete(self, key: Any, timestamp: int) -> None:
        self._live.discard((timestamp, key))

    def peek(self) -> int | None:
        heap = self._heap
        while heap and (heap[0][0], heap[0][2]) not in self._live:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def pop_due(self, upto: int) -> list[tuple[Any, int]]:
        due: list[tuple[Any, int]] = []
        heap, live = self._heap, self._live
        while heap and heap[0][0] <= upto:
            timestamp, _, key = heapq.heappop(heap)
            if (timestamp, key) in live:
                live.discard((timestamp, key))
                due.append((key, timestamp))
        return due

    def entries(self) -> list[tuple[int, Any]]:
        return list(self._live)

    def clear(self) -> None:
        self._heap.clear()
        self._live.clear()


class TimerService:
    def __init__(self) -> None:
        self.event = _TimerQueue()
        self.processing = _TimerQueue()
        self.watermark = -(2**63)

    def advance_watermark(self, watermark: int, fire: FireFn) -> None:
        self.watermark = watermark
        # A timer callback may register further due timers; loop until none is due.
        while True:
            due = self.event.pop_due(watermark)
            if not due:
                return
            for key, timestamp in due:
                fire(key, timestamp)

    def fire_processing(self, now_ms: int, fire: FireFn) -> None:
        for key, timestamp in self.processing.pop_due(now_ms):
            fire(key, timestamp)

    def snapshot(self, max_parallelism: int) -> dict[int, dict[str, list[tuple[str, int, Any]]]]:
        groups: dict[int, dict[str, list[tuple[str, int, Any]]]] = {}
        for domain, queue in (("event", self.event), ("processing", self.processing)):
            for timestamp, key in queue.entries():
                group = groups.setdefault(key_group_for(key, max_parallelism), {})
                group.setdefault("timers", []).append((domain, timestamp, key))
        return groups

    def restore(self, timers: list[tuple[str, int, Any]]) -> None:
        for domain, timestamp, key in timers:
            (self.event if domain == "event" else self.processing).register(key, timestamp)
