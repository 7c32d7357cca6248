"""Per-split event time for a source subtask that reads several splits side by side.

Each open split has a clock: the highest timestamp read from it, when it last brought a record, and
whether it is idle. The subtask's watermark is the minimum over the clocks of its active splits, never
moving back; with every open split idle the subtask is idle. A closed split (ended) leaves the set.
"""

from __future__ import annotations

from dataclasses import dataclass

from sluice.engine.events import MIN_WATERMARK


@dataclass
class _Clock:
    highest: int
    last_record_ms: int
    idle: bool = False


class SplitClocks:
    def __init__(self, max_out_of_orderness_ms: int, idleness_ms: int | None) -> None:
        self.delay = max_out_of_orderness_ms
        self.idleness_ms = idleness_ms
        self._clocks: dict[int, _Clock] = {}
        self.emitted = MIN_WATERMARK
        self.idle = False
        """Whether the subtask last said it is idle (every open split idle)."""

    def open(self, split: int, now_ms: int) -> None:
        # A split that has produced nothing yet holds event time at its minimum, as in Flink: its first
        # records may be the oldest of all. Idleness is what releases it.
        self._clocks[split] = _Clock(MIN_WATERMARK + self.delay + 1, now_ms)

    def close(self, split: int) -> None:
        self._clocks.pop(split, None)

    def on_records(self, split: int, highest: int, now_ms: int) -> None:
        clock = self._clocks[split]
        clock.highest = max(clock.highest, highest)
        clock.last_record_ms = now_ms
        clock.idle = False

    def next_idle_check(self) -> int | None:
        """When the next active split turns idle if it brings nothing until then (ms), or None."""
        if self.idleness_ms is None:
            return None
        due = [c.last_record_ms + self.idleness_ms for c in self._clocks.values() if not c.idle]
        return min(due) if due else None

    def expire(self, now_ms: int) -> None:
        """Marks idle the splits that brought nothing for the idleness timeout."""
        if self.idleness_ms is None:
            return
        for clock in self._clocks.values():
            if not clock.idle and now_ms - clock.last_record_ms >= self.idleness_ms:
                clock.idle = True

    def advance(self) -> tuple[int | None, bool | None]:
        """(the new watermark when it moved forward, else None; the subtask's idleness when it changed,
        else None). The watermark comes first: an idle split must not hold back what is already due."""
        active = [c.highest - self.delay - 1 for c in self._clocks.values() if not c.idle]
        watermark = None
        if active and min(active) > self.emitted:
            self.emitted = watermark = min(active)
        idle = bool(self._clocks) and not active
        changed = None
        if idle != self.idle:
            self.idle = changed = idle
        return watermark, changed
