"""The lines `sluice run` ends with: what the run did (records, time, checkpoints) and where its output went.

A short run otherwise prints one progress line at most before its end: the summary is how a first user
sees that the job did something, and where to look for it.
"""

from __future__ import annotations

from typing import Any

from sluice.coordinator.views import JobView
from sluice.graph.jobgraph import JobGraph


def describe_sink(sink: Any) -> str:
    """Where a sink writes, as far as it says: a URI, a table, standard output, else its type."""
    kind = type(sink).__name__
    uri = getattr(sink, "uri", None)
    if isinstance(uri, str):
        return f"{uri} ({kind})"
    table = getattr(sink, "table", None)
    if isinstance(table, str):
        return f"table {table} ({kind})"
    if kind == "PrintSink":
        return "standard output (PrintSink)"
    return kind


def sink_destinations(graph: JobGraph) -> list[str]:
    """`uid: where` for each sink of the job (the last operator of each vertex no other vertex reads)."""
    found = []
    for vertex in graph.vertices:
        if vertex.outputs:
            continue
        spec = vertex.operators[-1]
        try:
            # The factory only wraps the user's sink object in its operator; nothing is opened.
            sink = getattr(spec.factory(spec.uid), "sink", None)
        except Exception:
            sink = None
        found.append(f"{spec.uid}: {describe_sink(sink) if sink is not None else 'unknown'}")
    return found


def run_summary(graph: JobGraph, view: JobView, elapsed_s: float) -> str:
    # Read: what the sources emitted; written: what the sinks took in (counts of the last attempt).
    read = sum(v.counts.records_in for v in view.vertices if graph.vertex(v.id).is_source)
    written = sum(v.counts.records_out for v in view.vertices if not graph.vertex(v.id).outputs)
    checkpoints = view.checkpoints
    restarts = f", {view.restarts} restart{'s' if view.restarts > 1 else ''}" if view.restarts else ""
    return (
        f"summary: ran {elapsed_s:.1f}s{restarts}; records read {read:,}, written {written:,}; "
        f"checkpoints {checkpoints.completed} completed, {checkpoints.failed} failed; "
        f"output: {'; '.join(sink_destinations(graph)) or 'no sinks'}"
    )
