"""W6's events, shared by the Sluice pipeline, the Structured Streaming peer and the reference.

W1's keys and values (key = (i * 7919) % 1000, v = i % 100) with event time i // 10 ms, paused 1 s after
every 100,000 events: each key then has one session (gap 500 ms) per block of 100,000 events. One event
in 100 (i % 100 == 42, from the third block on) is replayed 15 s late: its session has closed by then,
so it is late for both engines (dropped: Sluice with no allowed lateness, Spark by its watermark).
"""

from __future__ import annotations

from collections import defaultdict

GAP_MS = 500
BLOCK = 100_000
LATE_MS = 15_000


def w6_event(i: int) -> tuple[int, int, int]:
    """(key, ts_ms, v) of event i."""
    ts = i // 10 + (i // BLOCK) * 1000
    if is_late(i):
        ts -= LATE_MS
    return (i * 7919) % 1000, ts, i % 100


def is_late(i: int) -> bool:
    return i % 100 == 42 and i >= 2 * BLOCK


def reference_sessions(n: int) -> dict[tuple[int, int], tuple[int, int, int]]:
    """(key, session start) -> (session end, count, sum of v), over the on-time events, in plain Python."""
    by_key: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for i in range(n):
        if not is_late(i):
            key, ts, v = w6_event(i)
            by_key[key].append((ts, v))
    sessions: dict[tuple[int, int], tuple[int, int, int]] = {}
    for key, events in by_key.items():
        events.sort()
        start, last, count, total = events[0][0], events[0][0], 0, 0
        for ts, v in events:
            if ts > last + GAP_MS:
                sessions[(key, start)] = (last + GAP_MS, count, total)
                start, count, total = ts, 0, 0
            last = max(last, ts)
            count, total = count + 1, total + v
        sessions[(key, start)] = (last + GAP_MS, count, total)
    return sessions
