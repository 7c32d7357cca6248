"""`sluice status` without -o json: the job document as a summary (job, rates, vertices, checkpoints)."""

from __future__ import annotations

from typing import Any

from sluice._status import backpressure, duration, rate, summary
from sluice.cli import parser


def _document() -> dict[str, Any]:
    def vertex(vid: int, name: str, states: list[str], pressured: float | None, count: int) -> dict[str, Any]:
        return {
            "id": vid,
            "name": name,
            "uids": name.split(" -> "),
            "parallelism": len(states),
            "inputs": [] if vid == 0 else [{"vertex": 0, "partitioning": "hash"}],
            "finishedSubtasks": states.count("FINISHED"),
            "subtasks": [
                {"index": i, "state": s, "taskManager": 0, "metrics": {}} for i, s in enumerate(states)
            ],
            "metrics": {
                "recordsIn": count,
                "recordsOut": count + 1,
                "lateRecordsDropped": 0,
                "recordsInPerSecond": 12_345.0,
                "recordsOutPerSecond": None,
                "busyTimeMsPerSecond": 250.0,
                "backPressuredTimeMsPerSecond": pressured,
                "idleTimeMsPerSecond": 100.0,
            },
        }

    return {
        "jobId": "abc",
        "name": "uneven",
        "state": "RUNNING",
        "uptimeMs": 3_725_000,
        "attempt": 1,
        "restarts": 1,
        "error": None,
        "lastSavepoint": "file:///sp/savepoint-abc-7",
        "subtasks": {"total": 4, "running": 3, "finished": 1},
        "metrics": {"recordsIn": 1_000_000, "recordsOut": 999, "lateRecordsDropped": 0},
        "rates": {"recordsReadPerSecond": 2_000_000.0, "recordsWrittenPerSecond": None},
        "checkpoints": {
            "completed": 9,
            "failed": 1,
            "lastFailure": {"id": 8, "error": "timed out"},
            "recent": [
                {
                    "id": 9,
                    "kind": "checkpoint",
                    "status": "COMPLETED",
                    "triggerTime": 0,
                    "completionTime": 1500,
                    "durationMs": 1500,
                    "syncMs": 2.5,
                    "bytesWritten": 3 * 1024 * 1024,
                    "finishedSubtasks": 1,
                    "fullyFinishedOperators": ["short"],
                },
                {"id": 8, "kind": "checkpoint", "status": "FAILED", "triggerTime": 0, "durationMs": None},
            ],
        },
        "vertices": [
            vertex(0, "uneven -> ts", ["FINISHED", "RUNNING"], 600.0, 5_000),
            vertex(1, "count -> sink", ["RUNNING", "END_OF_DATA"], None, 70),
        ],
    }


def test_the_summary_names_state_rates_vertices_checkpoints_and_the_last_savepoint() -> None:
    text = summary(_document())
    lines = text.splitlines()
    assert lines[0] == "job uneven (abc): RUNNING, up 1h 2m, attempt 1 (1 restarts)"
    # Read by the source vertex, written by the vertex nothing reads (the sink).
    assert "records: read 5,000 (2.00M/s), written 71 (-)" in text
    assert "subtasks: 1 of 4 finished" in text
    header = next(line for line in lines if line.startswith("ID  VERTEX"))
    assert header.split() == ["ID", "VERTEX", "PARALLELISM", "FINISHED", "IN", "OUT", "BUSY", "BACKPRESSURED"]
    source = next(line for line in lines if line.startswith("0 ") and "uneven -> ts" in line)
    assert source.split()[4:] == ["2", "1/2", "12.3k/s", "-", "25%", "60%", "HIGH"]
    sink = next(line for line in lines if "count -> sink" in line)
    assert sink.split()[-2:] == ["25%", "-"]
    checkpoint = next(line for line in lines if line.startswith("9 "))
    assert checkpoint.split()[:3] == ["9", "checkpoint", "COMPLETED"]
    assert (
        "1.5 s" in checkpoint
        and "2.5 ms" in checkpoint
        and "3.0 MiB" in checkpoint
        and checkpoint.split()[-2:] == ["1", "short"]
    )
    assert "last failure: checkpoint 8: timed out" in text
    assert lines[-1] == "last savepoint: file:///sp/savepoint-abc-7"


def test_figures_are_formatted_for_people() -> None:
    assert [rate(None), rate(999.4), rate(45_678), rate(3_210_000)] == ["-", "999/s", "45.7k/s", "3.21M/s"]
    assert [duration(0.04), duration(42), duration(4_200), duration(185_000)] == [
        "0.0 ms",
        "42 ms",
        "4.2 s",
        "3m 5s",
    ]
    assert [backpressure(50), backpressure(300), backpressure(900)] == ["5% OK", "30% LOW", "90% HIGH"]


def test_status_prints_the_summary_unless_asked_for_json() -> None:
    args = parser().parse_args(["status", "--address", "http://127.0.0.1:1"])
    assert args.output == "text"
    assert parser().parse_args(["status", "--address", "x", "-o", "json"]).output == "json"


def test_the_summary_says_what_the_job_restored_and_which_state_it_dropped() -> None:
    job = _document()
    assert "restored from" not in summary(job)
    job["restoredFrom"] = {
        "path": "file:///sp/savepoint-abc-4",
        "kind": "savepoint",
        "checkpointId": 4,
        "attempt": 0,
        "droppedOperators": ["count-v1"],
    }
    assert (
        "restored from: savepoint 4 at file:///sp/savepoint-abc-4 (state dropped for: count-v1)"
        in summary(job).splitlines()
    )
