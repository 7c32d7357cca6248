"""The token bucket of a rate-limited source (`GeneratorSource(rate=...)`)."""

from __future__ import annotations

import time
from collections.abc import Callable


class TokenBucket:
    """At most `rate` records a second, in bursts of at most a tenth of a second's worth (one record at
    least): a source that was held back does not make up for lost time all at once."""

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0:
            raise ValueError(f"a source's rate must be positive, not {rate}")
        self.rate = rate
        self.capacity = max(rate / 10, 1.0)
        self._clock = clock
        self._tokens = 0.0
        self._at = clock()

    def allowance(self, most: int) -> int:
        """How many records may go now, up to `most`."""
        now = self._clock()
        self._tokens = min(self._tokens + (now - self._at) * self.rate, self.capacity)
        self._at = now
        return min(most, int(self._tokens))

    def spend(self, records: int) -> None:
        self._tokens -= records

    def refill_seconds(self) -> float:
        """How long until the bucket is full. Waiting any longer loses tokens, and the source falls
        below its rate: an idle source polls no later than this."""
        return max(0.0, (self.capacity - self._tokens) / self.rate)
