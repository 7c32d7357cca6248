"""The control messages' wire form is pinned: a coordinator and TaskManagers of one version interoperate.

The pinned bytes were written by the hand-written encoders that the declarative codec replaced; each
sample sets every field (and leaves out every one that may be left out) at least once.
"""

# ruff: noqa: E501  (the pinned wire form is kept as one line per message, exactly as sent)
from __future__ import annotations

import json

import pytest

from sluice._states import StopMode, SubtaskState
from sluice.checkpoint.acknowledgement import AckedOperator, Acknowledgement
from sluice.coordinator.control import TO_COORDINATOR
from sluice.state.chain_files import KeyedFile
from sluice.transport.messages import (
    STATE_WRITE,
    TO_TASKMANAGER,
    Abort,
    Complete,
    Decline,
    Deploy,
    Heartbeat,
    JobEnd,
    Message,
    MetricsReport,
    Register,
    Shutdown,
    Stop,
    TaskReport,
    Trigger,
    decode_message,
    encode_message,
)

PINNED = {
    "deploy": '{"type":"deploy","attempt":2,"jobId":"job-1","graph":"Z3JhcGg=","tasks":[[0,0],[1,3]],"placement":{"0:0":0,"1:3":1},"taskmanagers":{"0":["10.0.0.1",4000],"1":["h2",4001]},"restore":"file:///chk/chk-4","attemptToken":"tok","waitForFinalCheckpoint":true,"restoreDigest":"abababababababababababababababababababababababababababababababab"}',
    "deploy-fresh": '{"type":"deploy","attempt":0,"jobId":"job-1","graph":"","tasks":[],"placement":{},"taskmanagers":{},"restore":null,"attemptToken":"tok","waitForFinalCheckpoint":false}',
    "trigger": '{"type":"trigger","checkpoint":3,"timestamp":1700000000000,"location":"file:///chk/job/chk-3","savepoint":true,"tasks":[[0,0],[0,1]],"completed":2}',
    "complete": '{"type":"complete","checkpoint":3}',
    "abort": '{"type":"abort","checkpoint":4}',
    "stop-drain": '{"type":"stop","drain":true}',
    "stop-suspend": '{"type":"stop","drain":false}',
    "shutdown": '{"type":"shutdown"}',
    "shutdown-ended": '{"type":"shutdown","jobEnded":{"latestCheckpoint":7,"savepoints":[2,5]}}',
    "register": '{"type":"register","tm":1,"host":"host-a","dataPort":4000,"pid":321}',
    "heartbeat": '{"type":"heartbeat","tm":1,"pid":321,"dataPort":4000}',
    "task-running": '{"type":"task","vertex":0,"subtask":1,"state":"RUNNING"}',
    "task-failed": '{"type":"task","vertex":0,"subtask":1,"state":"FAILED","error":"boom","trace":"Traceback","storage":true}',
    "task-ended": '{"type":"task","vertex":2,"subtask":0,"state":"FINISHED","drain":false}',
    "decline": '{"type":"decline","checkpoint":5,"vertex":1,"subtask":0,"reason":"disk full","cause":"state-write"}',
    "decline-plain": '{"type":"decline","checkpoint":5,"vertex":1,"subtask":0,"reason":"aborted"}',
    "metrics": '{"type":"metrics","tm":1,"metrics":{"0:1":{"recordsIn":7,"busyRatio":0.5,"lag":null}}}',
    "ack": '{"type":"ack","checkpoint":6,"vertex":1,"subtask":2,"operators":[{"uid":"src","finished":false,"union":false,"operatorState":true,"keyGroups":null,"pendingCommits":false,"path":"src-1.state","size":12,"bytesWritten":12,"stateSize":12,"sha256":"cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"},{"uid":"win","finished":false,"union":false,"operatorState":false,"keyGroups":[0,63],"pendingCommits":false,"path":null,"size":0,"bytesWritten":100,"stateSize":140,"keyedFiles":[{"name":"win-1-6.kv","size":100,"full":true,"shared":true,"sha256":"efefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefef"},{"name":"win-1-5.kv","size":40,"full":false,"shared":true}],"protectedFiles":["win-1-6-5f1c2a9e0b7d.kv"]},{"uid":"sink","finished":true,"union":true,"operatorState":true,"keyGroups":null,"pendingCommits":true,"path":"sink-1.state","size":9,"bytesWritten":0,"stateSize":0}],"endOfData":false,"syncMs":1.25,"asyncMs":3.5,"startDelayMs":0.0,"alignmentMs":2.125}',
}


def _samples() -> dict[str, Message]:
    return {
        "deploy": Deploy(
            2,
            "job-1",
            "Z3JhcGg=",
            ((0, 0), (1, 3)),
            {(0, 0): 0, (1, 3): 1},
            {0: ("10.0.0.1", 4000), 1: ("h2", 4001)},
            "file:///chk/chk-4",
            "tok",
            True,
            "ab" * 32,
        ),
        "deploy-fresh": Deploy(0, "job-1", "", (), {}, {}, None, "tok", False),
        "trigger": Trigger(3, 1700000000000, "file:///chk/job/chk-3", True, ((0, 0), (0, 1)), completed=2),
        "complete": Complete(3),
        "abort": Abort(4),
        "stop-drain": Stop(StopMode.TERMINATE),
        "stop-suspend": Stop(StopMode.SUSPEND),
        "shutdown": Shutdown(),
        "shutdown-ended": Shutdown(JobEnd(7, (2, 5))),
        "register": Register(1, "host-a", 4000, 321),
        "heartbeat": Heartbeat(1, 321, 4000),
        "task-running": TaskReport(0, 1, SubtaskState.RUNNING),
        "task-failed": TaskReport(0, 1, SubtaskState.FAILED, "boom", "Traceback", None, True),
        "task-ended": TaskReport(2, 0, SubtaskState.FINISHED, drain=False),
        "decline": Decline(5, 1, 0, "disk full", STATE_WRITE),
        "decline-plain": Decline(5, 1, 0, "aborted"),
        "metrics": MetricsReport(1, {"0:1": {"recordsIn": 7, "busyRatio": 0.5, "lag": None}}),
        "ack": Acknowledgement(
            6,
            1,
            2,
            (
                AckedOperator(
                    "src", False, "src-1.state", 12, None, True, False, False, (), (), 12, 12, "cd" * 32
                ),
                AckedOperator(
                    "win",
                    False,
                    None,
                    0,
                    (0, 63),
                    False,
                    False,
                    False,
                    (
                        KeyedFile("win-1-6.kv", 100, True, True, "ef" * 32),
                        KeyedFile("win-1-5.kv", 40, False, True),
                    ),
                    ("win-1-6-5f1c2a9e0b7d.kv",),
                    100,
                    140,
                ),
                AckedOperator("sink", True, "sink-1.state", 9, None, True, True, True),
            ),
            False,
            1.25,
            3.5,
            0.0,
            2.125,
        ),
    }


@pytest.mark.parametrize("name", sorted(PINNED))
def test_the_codec_writes_the_wire_form_of_earlier_versions(name: str) -> None:
    # Compared as JSON values: a reader sees an object's fields by name, never in order.
    assert json.loads(encode_message(_samples()[name])) == json.loads(PINNED[name])


@pytest.mark.parametrize("name", sorted(PINNED))
def test_the_wire_form_of_earlier_versions_reads_back_as_the_message(name: str) -> None:
    message = _samples()[name]
    kinds = TO_COORDINATOR if json.loads(PINNED[name])["type"] in TO_COORDINATOR else TO_TASKMANAGER
    assert decode_message(PINNED[name].encode(), kinds) == message
