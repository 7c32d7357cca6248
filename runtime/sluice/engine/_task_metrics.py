"""Where a subtask's time goes, measured in its loop with Flink's definitions.

A subtask is *idle* while it waits for input (its loop found nothing to do and waits for an event, a
timer or a message), *backpressured* while it waits for room in a full output channel, and *busy* the
rest of the time. Only the two waits are timed; busy time is what is left of the subtask's lifetime,
so it also holds the time the subtask waited for its TaskManager's event loop, which the subtasks of
one TaskManager share (Flink gives each task a thread; here a ready subtask may wait for another one).

Totals are cumulative nanoseconds on the TaskManager's monotonic clock. The coordinator turns the
difference of two heartbeats into milliseconds per second, so no per-second bookkeeping runs here.
"""

from __future__ import annotations

import time


class WaitClock:
    """Accumulates the time spent in one kind of wait, including a wait still going on."""

    __slots__ = ("_since", "total_ns")

    def __init__(self) -> None:
        self.total_ns = 0
        self._since = 0

    def start(self) -> None:
        if not self._since:
            self._since = time.monotonic_ns()

    def stop(self) -> None:
        since = self._since
        if since:
            self.total_ns += time.monotonic_ns() - since
            self._since = 0

    def read(self, now_ns: int) -> int:
        """The total so far, as of `now_ns`: a wait in progress counts up to now (a subtask stuck
        behind a full channel for a minute shows it while it is stuck, not after)."""
        since = self._since
        return self.total_ns + (now_ns - since if since and now_ns > since else 0)
