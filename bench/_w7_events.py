"""W7's events and the pairs its interval join must find, in plain Python (shared by both engines' checks).

Both sides have W1's shape: event i has key (i * 7919) % 1000 and event time START_MS + i // 10 ms. A
left event i and a right event j pair when their keys are equal and |i // 10 - j // 10| <= 500 ms. Since
7919 is invertible modulo 1000, equal keys means j = i + 1000 m, so each left event has about a dozen
partners.

The times start at a real date, not at the epoch: Structured Streaming's watermark before its first
batch is 0 (the epoch) and its join drops a row whose time is at or before the watermark as late, so
events at 0 ms (ids 0-9 of each side, 110 pairs) were dropped by the peer, which lacked them in every
run until session 14.
"""

from __future__ import annotations

BOUND_MS = 500
START_MS = 1_767_225_600_000
"""2026-01-01 00:00:00 UTC; the Sluice pipeline (bench/pipelines/w7_interval_join.py) has its own copy."""


def w7_event(i: int) -> tuple[int, int, int]:
    """(key, ts_ms, id) of event i, on either side."""
    return (i * 7919) % 1000, START_MS + i // 10, i


def reference_pairs(n: int) -> tuple[int, int]:
    """(number of pairs, checksum) the join of two sides of n events each must give; the checksum is
    the sum of i * n + j over the pairs (i, j), so a lost, doubled or wrong pair changes it."""
    count = checksum = 0
    reach = BOUND_MS * 10 // 1000 + 1
    for i in range(n):
        ts = i // 10
        for m in range(-reach, reach + 1):
            j = i + 1000 * m
            if 0 <= j < n and abs(j // 10 - ts) <= BOUND_MS:
                count += 1
                checksum += i * n + j
    return count, checksum
