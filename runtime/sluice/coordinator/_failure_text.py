"""A failed task's traceback as its user needs it: the frames of their own code, not the engine's.

A TaskManager sends the whole formatted traceback of a subtask's failure. Most of its frames are the
engine's (the task loop, the operator chain, the channels), which say nothing to the person whose map
function raised; those are logged only with `sluice run --verbose`. A frame is the engine's when its
file lies inside an installed `sluice` package, wherever that package is (a TaskManager on another host
has its own path), so a user's own `~/sluice/pipeline.py` still counts as theirs.
"""

from __future__ import annotations

import logging
import re
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from sluice_contract.codec import Document, wire

log = logging.getLogger("sluice.coordinator.jobmaster")  # where task failures have always been logged
_FRAME = re.compile(r'^  File "(?P<path>[^"]+)", line \d+')
# The names directly inside the sluice package (this file is sluice/coordinator/_failure_text.py).
_PACKAGE_PARTS = frozenset(p.name for p in Path(__file__).resolve().parents[1].iterdir())


def _is_engine(path: str) -> bool:
    parts = path.replace("\\", "/").split("/")
    return any(
        part == "sluice" and index + 1 < len(parts) and parts[index + 1] in _PACKAGE_PARTS
        for index, part in enumerate(parts)
    )


def user_frames(trace: str) -> str:
    """`trace` without the engine's frames; the exception lines stay. Empty when no frame is the user's."""
    kept: list[str] = []
    skipping = False
    user = 0
    for line in trace.splitlines():
        frame = _FRAME.match(line)
        if frame is not None:
            skipping = _is_engine(frame.group("path"))
            user += not skipping
            if not skipping:
                kept.append(line)
        elif line.startswith("    ") and skipping:
            continue  # the source line (and carets) of an engine frame
        else:
            skipping = False
            kept.append(line)
    return "\n".join(kept) if user else ""


HISTORY = 20


@dataclass(frozen=True)
class AttemptFailure(Document):
    """Why an attempt failed, as GET /v1/job's `exceptions` show it."""

    time_ms: int = field(metadata=wire(name="time"))
    attempt: int
    reason: str = field(metadata=wire(name="error"))


class FailureLog:
    """Logs each distinct task failure once, with the user's frames; the whole traceback at INFO
    (`sluice run --verbose`). A restart that fails the same way is said by the restart's own line."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self.history: deque[AttemptFailure] = deque(maxlen=HISTORY)
        """Why attempts failed, newest last: the dashboard's and GET /v1/job's exception history."""

    def attempt_failed(self, attempt: int, reason: str) -> None:
        self.history.append(AttemptFailure(time.time_ns() // 1_000_000, attempt, reason))

    def task_failed(self, task: str, error: str | None, trace: str | None) -> None:
        if error not in self._seen:
            self._seen.add(error or "")
            mine = user_frames(trace or "")
            log.error("task %s failed: %s%s", task, error, f"\n{mine}" if mine else "")
        if trace:
            log.info("task %s failed; its whole traceback:\n%s", task, trace)
