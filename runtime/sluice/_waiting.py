"""Waiting with a time limit without losing a cancellation, which `asyncio.wait_for` can do.

In Python 3.11, `asyncio.wait_for` returns the awaited result when the waiting task is cancelled after
that result arrived but before the task resumed (CPython gh-86296, fixed in 3.12): `cancel()` says the
task took the cancellation, and the task goes on as if nobody had asked it to end. A stream task that
goes on after its TaskManager was cancelled runs to its end and then waits for a final checkpoint
that never comes. `sluice.testing` saw a TaskManager thread not end within 30 s of being cancelled
(`tests/integration/runtime/test_data_port_flood.py`, 2 runs in about 187, no stack kept; its host now
reports the stuck thread's stack). These helpers use `asyncio.timeout`, which keeps a cancellation that
comes from anywhere else; `tests/unit/runtime/test_waiting.py` fails with `wait_for` in their place.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def within(awaitable: Awaitable[T], timeout_s: float | None) -> T:
    """`await awaitable`, raising TimeoutError after `timeout_s` (None: no limit)."""
    async with asyncio.timeout(timeout_s):
        return await awaitable


async def wait_event(event: asyncio.Event, timeout_s: float | None) -> bool:
    """Whether `event` was set within `timeout_s`."""
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return False
    return True
