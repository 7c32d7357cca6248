"""W7's events and the pairs its interval join must find, in plain Python (shared by both engines' checks).

Both sides have W1's shape: event i has key (i * 7919) % 1000 and event time i // 10 ms. A left event i
and a right event j pair when their keys are equal and |i // 10 - j // 10| <= 500 ms. Since 7919 is
invertible modulo 1000, equal keys means j = i + 1000 m, so each left event has about a dozen partners.
"""

from __future__ import annotations

BOUND_MS = 500


def w7_event(i: int) -> tuple[int, int, int]:
    """(key, ts_ms, id) of event i, on either side."""
    return (i * 7919) % 1000, i // 10, i


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
