"""`sluice status`: the GET /v1/job document as a summary a person reads at a glance.

Pure formatting (document in, text out), so it is tested without a job. The figures are the document's:
record rates over the last seconds of heartbeats, busy and backpressured time in Flink's definitions
(the worst subtask of each vertex), with Flink's web UI levels for backpressure (OK up to 10% of the
time, LOW up to 50%, HIGH above).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

_RECENT = 5


def rate(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1e6:
        return f"{value / 1e6:.2f}M/s"
    if value >= 1e4:
        return f"{value / 1e3:.1f}k/s"
    return f"{value:,.0f}/s"


def duration(ms: float | None) -> str:
    if ms is None:
        return "-"
    if ms < 10:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 120_000:
        return f"{ms / 1000:.1f} s"
    seconds = int(ms // 1000)
    hours, minutes = divmod(seconds // 60, 60)
    return f"{hours}h {minutes}m" if hours else f"{minutes}m {seconds % 60}s"


def size(count: int | None) -> str:
    if count is None:
        return "-"
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def backpressure(ms: float | None) -> str:
    if ms is None:
        return "-"
    level = "HIGH" if ms > 500 else "LOW" if ms > 100 else "OK"
    return f"{ms / 10:.0f}% {level}"


def _clock(ms: int | None) -> str:
    return "-" if ms is None else time.strftime("%H:%M:%S", time.localtime(ms / 1000))


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]
    return [
        "  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in (header, *rows)
    ]


def summary(job: dict[str, Any]) -> str:
    lines = [
        f"job {job['name']} ({job['jobId']}): {job['state']}, up {duration(job.get('uptimeMs'))}, "
        f"attempt {job['attempt']} ({job['restarts']} restarts)"
    ]
    if job.get("error"):
        lines.append(f"error: {job['error']}")
    restored = job.get("restoredFrom")
    if restored:
        line = f"restored from: {restored['kind']} {restored['checkpointId']} at {restored['path']}"
        if restored.get("droppedOperators"):
            line += f" (state dropped for: {', '.join(restored['droppedOperators'])})"
        lines.append(line)
    # Read: what the sources emitted; written: what the sinks (vertices no other vertex reads) took.
    vertices = job["vertices"]
    consumed = {edge["vertex"] for v in vertices for edge in v.get("inputs", [])}
    read = sum(v["metrics"]["recordsIn"] for v in vertices if not v.get("inputs"))
    written = sum(v["metrics"]["recordsOut"] for v in vertices if v["id"] not in consumed)
    rates = job.get("rates", {})
    lines.append(
        f"records: read {read:,} ({rate(rates.get('recordsReadPerSecond'))}), "
        f"written {written:,} ({rate(rates.get('recordsWrittenPerSecond'))})"
    )
    subtasks = job["subtasks"]
    lines.append(f"subtasks: {subtasks['finished']} of {subtasks['total']} finished")
    lines.append("")
    rows = []
    for vertex in job["vertices"]:
        m = vertex["metrics"]
        finished = vertex.get("finishedSubtasks", sum(s["state"] == "FINISHED" for s in vertex["subtasks"]))
        rows.append(
            [
                str(vertex["id"]),
                vertex["name"],
                str(vertex["parallelism"]),
                f"{finished}/{vertex['parallelism']}",
                rate(m.get("recordsInPerSecond")),
                rate(m.get("recordsOutPerSecond")),
                "-" if m.get("busyTimeMsPerSecond") is None else f"{m['busyTimeMsPerSecond'] / 10:.0f}%",
                backpressure(m.get("backPressuredTimeMsPerSecond")),
            ]
        )
    lines += table(["ID", "VERTEX", "PARALLELISM", "FINISHED", "IN", "OUT", "BUSY", "BACKPRESSURED"], rows)
    checkpoints = job["checkpoints"]
    lines += ["", f"checkpoints: {checkpoints['completed']} completed, {checkpoints['failed']} failed"]
    recent = checkpoints.get("recent", [])[:_RECENT]
    if recent:
        rows = [
            [
                str(c["id"]),
                c["kind"],
                c["status"],
                _clock(c.get("triggerTime")),
                duration(c.get("durationMs")),
                duration(c.get("syncMs")),
                size(c.get("bytesWritten")),
                "-" if c.get("finishedSubtasks") is None else str(c["finishedSubtasks"]),
                ", ".join(c.get("fullyFinishedOperators") or []) or "-",
            ]
            for c in recent
        ]
        header = ["ID", "KIND", "STATUS", "TRIGGERED", "DURATION", "SYNC", "WRITTEN"]
        lines += table([*header, "FINISHED SUBTASKS", "FULLY FINISHED OPERATORS"], rows)
    failure = checkpoints.get("lastFailure")
    if failure:
        lines.append(f"last failure: checkpoint {failure['id']}: {failure['error']}")
    lines += ["", f"last savepoint: {job.get('lastSavepoint') or 'none'}"]
    return "\n".join(lines)
