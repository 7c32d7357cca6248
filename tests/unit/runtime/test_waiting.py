"""`sluice._waiting`: a time limit that never loses a cancellation.

The race: the waited-for thing arrives, and before the waiting task resumes, someone cancels it. With
Python 3.11's `asyncio.wait_for` the task then returns as if nothing had been asked of it (checked:
`wait_for(event.wait(), 10)` in this scenario returns), and a TaskManager went on running after its
attempt was cancelled.
"""

from __future__ import annotations

import asyncio
from typing import TypeVar

import pytest

from sluice._waiting import wait_event, within

T = TypeVar("T")


def test_wait_event_says_whether_the_event_came_in_time() -> None:
    async def scenario() -> tuple[bool, bool]:
        event = asyncio.Event()
        missed = await wait_event(event, 0.01)
        asyncio.get_running_loop().call_later(0.01, event.set)
        return missed, await wait_event(event, 10)

    assert asyncio.run(scenario()) == (False, True)


def test_within_gives_the_result_or_raises_timeout_error() -> None:
    async def scenario() -> int:
        with pytest.raises(TimeoutError):
            await within(asyncio.sleep(10), 0.01)
        return await within(asyncio.sleep(0, result=7), 10)

    assert asyncio.run(scenario()) == 7


async def _cancel_turns_later(waiting: asyncio.Task[T], turns: int) -> tuple[bool, T | None]:
    """`turns` turns of the loop later, cancels `waiting`: (True, None) if it took the cancellation,
    which it must then end with; (False, its result) if it had ended already."""
    for _ in range(turns):
        await asyncio.sleep(0)
    if waiting.cancel():
        with pytest.raises(asyncio.CancelledError):
            await waiting
        return True, None
    return False, await waiting


@pytest.mark.parametrize("turns", [0, 1, 2, 3])
def test_a_cancellation_the_task_accepted_is_never_lost(turns: int) -> None:
    """The event comes, then `turns` turns of the loop later a cancel: whenever `cancel()` says the task
    took it, the task must end cancelled. (`asyncio.wait_for` in 3.11 takes it at one turn and returns.)"""

    async def scenario() -> None:
        event = asyncio.Event()
        waiting = asyncio.create_task(wait_event(event, 10))
        await asyncio.sleep(0)  # it waits
        event.set()
        cancelled, result = await _cancel_turns_later(waiting, turns)
        if not cancelled:
            assert result is True, "too late to cancel: it had ended, with the event"

    asyncio.run(scenario())


@pytest.mark.parametrize("turns", [0, 1, 2, 3])
def test_a_cancellation_accepted_after_the_result_came_is_never_lost(turns: int) -> None:
    async def scenario() -> None:
        result: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        waiting = asyncio.create_task(within(result, 10))
        await asyncio.sleep(0)
        result.set_result(1)
        cancelled, value = await _cancel_turns_later(waiting, turns)
        if not cancelled:
            assert value == 1

    asyncio.run(scenario())
