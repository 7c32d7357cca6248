"""The warm-up task that starts PySpark's worker daemon: harmless when Spark cannot run it."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from sluice.hosts.spark._warm_up import JOB_GROUP, no_records, start_worker_daemon


class _StoppedContext:
    """A SparkContext stopped before the warm-up submitted its task (the job ended on a usage error)."""

    def __init__(self) -> None:
        self.groups: list[str] = []

    def setJobGroup(self, group: str, description: str, interruptOnCancel: bool = False) -> None:  # noqa: N802, N803
        self.groups.append(group)

    def parallelize(self, data: Any, slices: int) -> Any:
        raise RuntimeError("Cannot call methods on a stopped SparkContext.")


def test_a_warm_up_spark_cannot_run_ends_its_thread_quietly(caplog: pytest.LogCaptureFixture) -> None:
    context = _StoppedContext()
    with caplog.at_level(logging.DEBUG, logger="sluice.hosts.spark._warm_up"):
        thread = start_worker_daemon(context)
        thread.join(10)
    assert not thread.is_alive()
    assert context.groups == [JOB_GROUP], "the task is submitted under a job group of its own"
    assert "stopped SparkContext" in caplog.text, "what kept it from running is logged (debug)"


def test_the_warm_up_task_yields_no_record() -> None:
    assert list(no_records(iter([0]))) == []
