"""Every check the hand-written control-message readers made holds on the declarative codec: a
malformed message is refused with the message and the field named, and ends the connection."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sluice.coordinator.control import TO_COORDINATOR
from sluice.transport.messages import TO_TASKMANAGER, MessageError, MetricsReport, Trigger, decode_message

DEPLOY: dict[str, Any] = {
    "type": "deploy",
    "attempt": 0,
    "jobId": "j",
    "graph": "",
    "tasks": [[0, 1]],
    "placement": {"0:1": 0},
    "taskmanagers": {"0": ["127.0.0.1", 1]},
    "restore": None,
    "attemptToken": "t",
    "waitForFinalCheckpoint": False,
}
TRIGGER: dict[str, Any] = {
    "type": "trigger",
    "checkpoint": 1,
    "timestamp": 5,
    "location": "file:///c/chk-1",
    "savepoint": False,
    "tasks": [[0, 0]],
    "completed": 0,
}
ACK_OPERATOR: dict[str, Any] = {
    "uid": "a",
    "finished": False,
    "path": None,
    "size": 0,
    "operatorState": True,
    "union": False,
    "pendingCommits": False,
}
ACK: dict[str, Any] = {
    "type": "ack",
    "checkpoint": 2,
    "vertex": 0,
    "subtask": 0,
    "endOfData": False,
    "operators": [ACK_OPERATOR],
}


def _refused(message: dict[str, Any], kinds: Any) -> str:
    with pytest.raises(MessageError) as caught:
        decode_message(json.dumps(message).encode(), kinds)
    return str(caught.value)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"attempt": -1}, "control message 'deploy': 'attempt' must be at least 0"),
        ({"tasks": [[0, -1]]}, "'tasks[0][1]' must be at least 0"),
        ({"tasks": [[0, True]]}, "'tasks[0][1]' must be an integer, not a boolean"),
        ({"tasks": [[0]]}, "'tasks[0]' must be an array of 2 items"),
        ({"placement": {"0:1": -1}}, "'placement[0:1]' must be at least 0"),
        ({"placement": {"0-1": 0}}, "'placement' must have keys like '0:0', not \"0-1\""),
        ({"placement": {"0:1": True}}, "'placement[0:1]' must be an integer, not a boolean"),
        ({"taskmanagers": {"zero": ["h", 1]}}, "'taskmanagers' must have keys like '0', not \"zero\""),
        ({"taskmanagers": {"0": ["h", True]}}, "'taskmanagers[0][1]' must be an integer, not a boolean"),
        ({"taskmanagers": {"0": [1, 2]}}, "'taskmanagers[0][0]' must be a string, not a number"),
        ({"taskmanagers": {"0": "h:1"}}, "'taskmanagers[0]' must be an array of 2 items, not a string"),
        ({"waitForFinalCheckpoint": 1}, "'waitForFinalCheckpoint' must be true or false, not a number"),
        ({"restoreDigest": 7}, "'restoreDigest' must be a string or null, not a number"),
        ({"graph": {"py/object": "os.system"}}, "'graph' must be a string, not an object"),
    ],
)
def test_a_malformed_deploy_is_refused_with_the_field_named(change: dict[str, Any], problem: str) -> None:
    assert problem in _refused({**DEPLOY, **change}, TO_TASKMANAGER)


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ({k: v for k, v in TRIGGER.items() if k != "completed"}, "'trigger' lacks the field 'completed'"),
        ({**TRIGGER, "checkpoint": -3}, "'checkpoint' must be at least 0"),
        ({**TRIGGER, "savepoint": "no"}, "'savepoint' must be true or false, not a string"),
        (
            {"type": "complete", "checkpoint": "3"},
            "'complete': 'checkpoint' must be an integer, not a string",
        ),
        ({"type": "abort"}, "control message 'abort' lacks the field 'checkpoint'"),
        ({"type": "stop", "drain": "yes"}, "'stop': 'drain' must be true or false, not a string"),
        ({"type": "shutdown", "jobEnded": {"latestCheckpoint": 1}}, "'shutdown' jobEnded lacks the field"),
        (
            {"type": "shutdown", "jobEnded": {"latestCheckpoint": 1, "savepoints": [-1]}},
            "'savepoints[0]' must be at least 0",
        ),
    ],
)
def test_a_malformed_message_to_a_taskmanager_is_refused(message: dict[str, Any], problem: str) -> None:
    assert problem in _refused(message, TO_TASKMANAGER)


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ({"type": "heartbeat", "tm": -1, "pid": 1, "dataPort": 2}, "'tm' must be at least 0"),
        ({"type": "decline", "checkpoint": 1, "vertex": 0, "subtask": 0}, "lacks the field 'reason'"),
        (
            {"type": "task", "vertex": 0, "subtask": 0, "state": "FAILED", "storage": 1},
            "'storage' must be true or false or null, not a number",
        ),
        ({"type": "metrics", "tm": 0}, "control message 'metrics' lacks the field 'metrics'"),
        ({**ACK, "operators": [{**ACK_OPERATOR, "size": -1}]}, "operators[0]: 'size' must be at least 0"),
        (
            {**ACK, "operators": [{k: v for k, v in ACK_OPERATOR.items() if k != "union"}]},
            "acknowledgement of checkpoint 2 operators[0] lacks the field 'union'",
        ),
        (
            {**ACK, "operators": [{**ACK_OPERATOR, "keyGroups": [5, 2]}]},
            "'keyGroups' must be null or [first, last]",
        ),
        (
            {**ACK, "operators": [{**ACK_OPERATOR, "sha256": "AB"}]},
            "'sha256' must be 64 lowercase hexadecimal",
        ),
        ({**ACK, "vertex": -1}, "acknowledgement of checkpoint 2: 'vertex' must be at least 0"),
    ],
)
def test_a_malformed_report_to_the_coordinator_is_refused(message: dict[str, Any], problem: str) -> None:
    assert problem in _refused(message, TO_COORDINATOR)


def test_a_message_read_as_another_type_is_refused() -> None:
    with pytest.raises(ValueError, match=r"'type' must be 'trigger', not a string \(\"abort\"\)"):
        Trigger.from_json({**TRIGGER, "type": "abort"})


def test_metrics_keep_subtask_keys_as_text_and_their_figures_as_sent() -> None:
    sent = {"type": "metrics", "tm": 0, "metrics": {"1:2": {"recordsIn": 7, "busy": 0.25, "lag": None}}}
    read = decode_message(json.dumps(sent).encode(), TO_COORDINATOR)
    assert read == MetricsReport(0, {"1:2": {"recordsIn": 7, "busy": 0.25, "lag": None}})
    assert isinstance(read, MetricsReport) and type(read.metrics["1:2"]["recordsIn"]) is int
