"""The parts of GET /v1/job that the job view's golden document leaves null or empty are pinned too: what
an attempt restored (`restoredFrom`) and why attempts failed (`exceptions`), as the hand-written writers
sent them before the codec replaced them (the same keys, in the same order)."""

from __future__ import annotations

import json

from sluice._states import CheckpointKind
from sluice.coordinator._failure_text import AttemptFailure, FailureLog
from sluice.coordinator._restore_info import RestoredFrom


def test_what_an_attempt_restored_is_shown_as_before() -> None:
    dropped = RestoredFrom("file:///chk/j/chk-3", CheckpointKind.CHECKPOINT, 3, 2, ("gone",))
    assert json.dumps(dropped.to_json()) == (
        '{"path": "file:///chk/j/chk-3", "kind": "checkpoint", "checkpointId": 3, "attempt": 2, '
        '"droppedOperators": ["gone"]}'
    )
    whole = RestoredFrom("file:///sp/savepoint-j-4", CheckpointKind.SAVEPOINT, 4, 0)
    assert json.dumps(whole.to_json()) == (
        '{"path": "file:///sp/savepoint-j-4", "kind": "savepoint", "checkpointId": 4, "attempt": 0, '
        '"droppedOperators": []}'
    )


def test_why_an_attempt_failed_is_shown_as_before() -> None:
    failure = AttemptFailure(1700000000000, 3, "boom")
    assert json.dumps(failure.to_json()) == '{"time": 1700000000000, "attempt": 3, "error": "boom"}'
    log = FailureLog()
    log.attempt_failed(1, "TaskManager 0 lost")
    (shown,) = [f.to_json() for f in log.history]
    assert (set(shown), shown["attempt"], shown["error"]) == (
        {"time", "attempt", "error"},
        1,
        "TaskManager 0 lost",
    )
