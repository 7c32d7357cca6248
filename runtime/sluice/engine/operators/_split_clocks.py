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

    def expire(self, now_ms: int) -> tuple[int | None, bool | None]:
        """Marks idle the splits that brought nothing for the idleness timeout and returns what changed,
        as `advance` does.

        The splits turn idle one at a time, in the order their timeouts fell due, and the watermark is
        taken after each: a timer that fires late, past the timeouts of every split at once, must still
        emit the watermark that was due when the first of them went idle and the others were active.
        Taken only at the end, with every split idle, it would never be emitted."""
        if self.idleness_ms is None:
            return self.advance()
        due = sorted(
            (clock.last_record_ms, split)
            for split, clock in self._clocks.items()
            if not clock.idle and now_ms - clock.last_record_ms >= self.idleness_ms
        )
        watermark = None
        for _, split in due:
            self._clocks[split].idle = True
            moved = self._advance_watermark()
            watermark = moved if moved is not None else watermark
        return watermark, self._update_idle()

    def advance(self) -> tuple[int | None, bool | None]:
        """(the new watermark when it moved forward, else None; the subtask's idleness when it changed,
        else None). The watermark comes first: an idle split must not hold back what is already due."""
        return self._advance_watermark(), self._update_idle()

    def _advance_watermark(self) -> int | None:
        active = [c.highest - self.delay - 1 for c in self._clocks.values() if not c.idle]
        if active and min(active) > self.emitted:
            self.emitted = min(active)
            return self.emitted
        return None

    def _update_idle(self) -> bool | None:
        idle = bool(self._clocks) and all(c.idle for c in self._clocks.values())
        if idle == self.idle:
            return None
        self.idle = idle
        return idle
