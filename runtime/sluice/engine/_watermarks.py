"""Combines the watermarks of a subtask's input channels.

The subtask's watermark is the minimum over its active channels. An idle channel (WatermarkStatus idle)
and a closed channel (EndOfPartition) do not hold it back; when every channel is idle the subtask is
idle too and passes that on.
"""

from __future__ import annotations

from sluice.engine.events import MIN_WATERMARK


class WatermarkValve:
    def __init__(self, num_channels: int) -> None:
        self.watermarks = [MIN_WATERMARK] * num_channels
        self.idle = [False] * num_channels
        self.closed = [False] * num_channels
        self.current = MIN_WATERMARK
        self._reported_idle = False

    def _active(self) -> list[int]:
        return [w for w, i, c in zip(self.watermarks, self.idle, self.closed, strict=True) if not (i or c)]

    def on_watermark(self, channel: int, timestamp: int) -> int | None:
        """The new combined watermark when it advanced, else None."""
        self.watermarks[channel] = max(self.watermarks[channel], timestamp)
        self.idle[channel] = False
        return self._advance()

    def on_status(self, channel: int, idle: bool) -> int | None:
        self.idle[channel] = idle
        return self._advance()

    def idleness_changed(self) -> bool | None:
        """True/False when the subtask as a whole just became idle/active again, else None."""
        idle = self.all_idle
        if idle == self._reported_idle:
            return None
        self._reported_idle = idle
        return idle

    def on_closed(self, channel: int) -> int | None:
        self.closed[channel] = True
        return self._advance()

    @property
    def all_idle(self) -> bool:
        return not self._active() and not all(self.closed)

    def _advance(self) -> int | None:
        active = self._active()
        if not active:
            return None
        combined = min(active)
        if combined > self.current:
            self.current = combined
            return combined
        return None
