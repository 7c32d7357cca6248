"""Which not-yet-authenticated connections a listening port keeps: bounded per peer and in total.

A connection is *pending* from the moment it is accepted (before TLS, with `--internal-tls`) until it
finished the handshake. Pending connections cost a file descriptor each, and with TLS a few hundred
kilobytes; a stranger who can reach the port can open them faster than any timeout drops them.

When a port is full, the newest connection is not the one turned away: that would let whoever holds
the slots keep the job's own TaskManagers out for good (issue 23 saw a job go FAILED that way). The
oldest pending connection of the peer address holding the most slots is dropped instead. A real peer
answers the challenge within a round trip, so it is never the oldest for long: to push it out, a flood
must open more connections from its address during that round trip than the per-peer bound, and the
peer then retries with back-off (`sluice.transport.wire`). A silent connection is dropped anyway once
`sluice.transport.handshake.HANDSHAKE_TIMEOUT_S` passed.

Refusals are logged at most once per `REFUSAL_LOG_INTERVAL_S`, with the count of the ones not shown: a
flood must not grow the log without bound.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable

MAX_PENDING_HANDSHAKES = 128
"""Connections that may be in their handshake (TLS included) at once, per listening port."""
MAX_PENDING_PER_PEER = 32
"""Of those, how many one peer address may hold."""
REFUSAL_LOG_INTERVAL_S = 10.0
"""At most one log line about refused connections per this many seconds and port."""


class Pending:
    """One accepted connection that has not authenticated yet; `release()` once it has, or ended."""

    __slots__ = ("_admission", "_drop", "peer")

    def __init__(self, admission: Admission, peer: str, drop: Callable[[], None]) -> None:
        self._admission, self.peer, self._drop = admission, peer, drop

    def release(self) -> None:
        self._admission._forget(self)

    def evict(self) -> None:
        self._drop()


class Admission:
    """The pending connections of one listening port, oldest first within each peer address."""

    def __init__(self, total: int = MAX_PENDING_HANDSHAKES, per_peer: int = MAX_PENDING_PER_PEER) -> None:
        if not 0 < per_peer <= total:
            raise ValueError(f"the per-peer bound ({per_peer}) must be between 1 and the total ({total})")
        self.total, self.per_peer = total, per_peer
        self._by_peer: dict[str, OrderedDict[int, Pending]] = {}
        self._count = 0
        self.evicted = 0
        """How many pending connections were dropped to make room (for tests and logs)."""

    def __len__(self) -> int:
        return self._count

    def admit(self, peer: str, drop: Callable[[], None]) -> Pending:
        """Counts a newly accepted connection from `peer`; `drop` closes it should it have to make room.

        Makes room first: the peer's own oldest when the peer is at its bound, else the oldest of the
        peer holding the most when the port is at its total.
        """
        mine = self._by_peer.get(peer)
        if mine is not None and len(mine) >= self.per_peer:
            self._evict_oldest(mine)
        elif self._count >= self.total:
            self._evict_oldest(max(self._by_peer.values(), key=len))
        entry = Pending(self, peer, drop)
        self._by_peer.setdefault(peer, OrderedDict())[id(entry)] = entry
        self._count += 1
        return entry

    def _evict_oldest(self, queue: OrderedDict[int, Pending]) -> None:
        _, oldest = next(iter(queue.items()))
        self._forget(oldest)
        self.evicted += 1
        oldest.evict()

    def _forget(self, entry: Pending) -> None:
        queue = self._by_peer.get(entry.peer)
        if queue is None or queue.pop(id(entry), None) is None:
            return  # released twice, or evicted and then released by its own handler
        self._count -= 1
        if not queue:
            del self._by_peer[entry.peer]


class RefusalLog:
    """Logs refused connections: the first at once, then one line per interval with the count held back."""

    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = REFUSAL_LOG_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log, self._interval_s, self._clock = logger, interval_s, clock
        self._last: float | None = None
        self.suppressed = 0

    def refused(self, what: str, peer: object, reason: object) -> None:
        now = self._clock()
        if self._last is not None and now - self._last < self._interval_s:
            self.suppressed += 1
            return
        held_back = (
            f" ({self.suppressed} more refused in the last {now - self._last:.0f}s, not logged)"
            if self._last is not None and self.suppressed
            else ""
        )
        self._log.warning("refused a %s connection from %s: %s%s", what, peer, reason, held_back)
        self._last, self.suppressed = now, 0
