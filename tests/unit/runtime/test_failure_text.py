"""A failed task's traceback shown to its user: their frames, not the engine's."""

from __future__ import annotations

import logging

import pytest

from sluice.coordinator._failure_text import FailureLog, user_frames

TRACE = """Traceback (most recent call last):
  File "/srv/venv/lib/python3.11/site-packages/sluice/engine/task.py", line 154, in run
    await self._loop()
  File "/srv/venv/lib/python3.11/site-packages/sluice/engine/operators/basic.py", line 40, in process_batch
    out = [fn(v) for v in values]
           ^^^^^
  File "/home/ann/sluice/pipeline.py", line 12, in parse
    return 1 // (i - 7)
           ~~^^~~~~~~~
ZeroDivisionError: integer division or modulo by zero
"""


def test_only_the_users_frames_and_the_exception_remain() -> None:
    shown = user_frames(TRACE)
    assert shown.splitlines() == [
        "Traceback (most recent call last):",
        '  File "/home/ann/sluice/pipeline.py", line 12, in parse',
        "    return 1 // (i - 7)",
        "           ~~^^~~~~~~~",
        "ZeroDivisionError: integer division or modulo by zero",
    ]


def test_a_trace_of_engine_frames_only_shows_nothing() -> None:
    lines = TRACE.splitlines()
    engine_only = "\n".join([*lines[:6], lines[-1]])  # the two engine frames and the exception
    assert user_frames(engine_only) == ""


def test_the_same_failure_is_logged_once_and_the_whole_trace_only_at_info(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failures = FailureLog()
    with caplog.at_level(logging.WARNING):
        failures.task_failed("parse[0]", "ZeroDivisionError: integer division or modulo by zero", TRACE)
        failures.task_failed("parse[0]", "ZeroDivisionError: integer division or modulo by zero", TRACE)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "pipeline.py" in errors[0].getMessage() and "engine/task.py" not in errors[0].getMessage()
    caplog.clear()
    with caplog.at_level(logging.INFO):
        FailureLog().task_failed("parse[0]", "ZeroDivisionError", TRACE)
    assert any("engine/task.py" in r.getMessage() for r in caplog.records if r.levelno == logging.INFO)
