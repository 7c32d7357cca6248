"""Restart strategies: how often and after how long a failed job is restarted from its checkpoint."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RestartStrategy:
    kind: str = "fixed-delay"
    """fixed-delay | exponential | none"""
    max_restarts: int = 3
    delay_s: float = 1.0
    max_delay_s: float = 60.0
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        if self.kind not in ("fixed-delay", "exponential", "none"):
            raise ValueError(f"unknown restart strategy {self.kind!r}: use fixed-delay, exponential or none")
        if self.max_restarts < 0 or self.delay_s < 0:
            raise ValueError("restart strategy: max restarts and delay must not be negative")

    def next_delay(self, restarts_so_far: int) -> float | None:
        """Seconds to wait before restart number `restarts_so_far + 1`, or None to give up."""
        if self.kind == "none" or restarts_so_far >= self.max_restarts:
            return None
        if self.kind == "fixed-delay":
            return self.delay_s
        return float(min(self.max_delay_s, self.delay_s * self.multiplier**restarts_so_far))
