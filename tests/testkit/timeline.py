"""A pytest hook that writes when each test ran, and on which worker, to SLUICE_TEST_TIMELINE.

scripts/test.sh sets SLUICE_TEST_TIMELINE=FILE for each tier; `scripts/_slowest.py --workers FILE` then
says how many seconds each pytest-xdist worker spent in tests and when its last test ended, which shows
a tier waiting on one worker's tail. Without the variable the hook writes nothing.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    started = time.time()
    yield
    timeline = os.environ.get("SLUICE_TEST_TIMELINE")
    if timeline:
        line = {
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            "test": item.nodeid,
            "start": started,  # before its set-up
            "end": time.time(),  # after its teardown
        }
        # One short write to a file opened for appending: lines of concurrent workers do not interleave.
        with open(timeline, "a") as file:
            file.write(json.dumps(line) + "\n")
