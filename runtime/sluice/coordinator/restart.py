"""Restart strategies: how often and after how long a failed job is restarted from its checkpoint.

Failures are counted from the last stable period on: a job that ran for `reset_after_s` without a
failure starts counting (and backing off) afresh, as Flink's exponential-delay strategy resets its
backoff. Without that, a long-running job would fail for good after `max_restarts` evictions spread
over months.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sluice._states import RestartKind


@dataclass
class RestartStrategy:
    kind: RestartKind = RestartKind.FIXED_DELAY
    """fixed-delay | exponential | none (a string is taken too: `--restart-strategy`)"""
    max_restarts: int = 3
    """Restarts allowed in a row, without a stable period between them."""
    delay_s: float = 1.0
    max_delay_s: float = 60.0
    multiplier: float = 2.0
    reset_after_s: float = 3600.0
    """Running this long since the last failure makes the next failure the first again."""
    jitter: float = 0.1
    """Exponential delays vary by up to this fraction, so that many jobs failing together (their
    shared database went away) do not come back all at once."""

    def __post_init__(self) -> None:
        if self.kind not in tuple(RestartKind):
            raise ValueError(f"unknown restart strategy {self.kind!r}: use fixed-delay, exponential or none")
        self.kind = RestartKind(self.kind)
        if self.max_restarts < 0 or self.delay_s < 0:
            raise ValueError("restart strategy: max restarts and delay must not be negative")
        if self.reset_after_s <= 0:
            raise ValueError("restart strategy: the reset period must be positive")
        if not 0 <= self.jitter < 1:
            raise ValueError("restart strategy: jitter is a fraction in [0, 1)")

    def next_delay(self, restarts_so_far: int) -> float | None:
        """Seconds to wait before restart number `restarts_so_far + 1` in a row, or None to give up."""
        if self.kind == RestartKind.NONE or restarts_so_far >= self.max_restarts:
            return None
        if self.kind == RestartKind.FIXED_DELAY:
            return self.delay_s
        return float(min(self.max_delay_s, self.delay_s * self.multiplier**restarts_so_far))

    def backoff(
        self, clock: Callable[[], float] = time.monotonic, rng: random.Random | None = None
    ) -> Backoff:
        return Backoff(self, clock, rng or random.Random())


@dataclass
class Backoff:
    """One job's failures under a strategy: in a row since its last stable period."""

    strategy: RestartStrategy
    clock: Callable[[], float]
    rng: random.Random = field(repr=False)
    in_a_row: int = 0
    last_failure: float | None = None

    def on_failure(self) -> float | None:
        """The delay before restarting after the failure that happened now, or None to give up."""
        now = self.clock()
        if self.last_failure is not None and now - self.last_failure >= self.strategy.reset_after_s:
            self.in_a_row = 0
        self.last_failure = now
        delay = self.strategy.next_delay(self.in_a_row)
        if delay is None:
            return None
        self.in_a_row += 1
        if self.strategy.kind == RestartKind.EXPONENTIAL and self.strategy.jitter:
            delay *= 1 + self.rng.uniform(-self.strategy.jitter, self.strategy.jitter)
        return delay
