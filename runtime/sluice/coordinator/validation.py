"""Checks that a checkpoint or savepoint can be restored into the job as it is built now."""

from __future__ import annotations

from sluice.checkpoint.metadata import CheckpointMetadata, OperatorEntry
from sluice.graph.jobgraph import JobGraph


class RestoreRefused(ValueError):
    pass


def validate_restore(
    graph: JobGraph, metadata: CheckpointMetadata, allow_non_restored_state: bool
) -> list[str]:
    """Raises RestoreRefused, or returns the uids whose state the restore drops (sorted)."""
    by_uid = {op.uid: op for op in metadata.operators}
    known = set(graph.operator_uids())
    orphaned = [uid for uid, op in by_uid.items() if uid not in known and (op.subtasks or op.fully_finished)]
    if orphaned and not allow_non_restored_state:
        raise RestoreRefused(
            f"{metadata.location} has state for operators the job no longer has: "
            f"{', '.join(sorted(orphaned))}. "
            "Give the operators their old uids, or pass --allow-non-restored-state to drop that state"
        )
    finished_vertex: dict[int, bool] = {}
    for vertex in graph.vertices:
        flags = [_fully_finished(by_uid.get(uid)) for uid in vertex.uids]
        if any(flags) and not all(flags):
            finished = [u for u, f in zip(vertex.uids, flags, strict=True) if f]
            running = [u for u, f in zip(vertex.uids, flags, strict=True) if not f]
            raise RestoreRefused(
                f"cannot restore from {metadata.location}: the chain {vertex.name!r} mixes "
                "fully finished "
                f"operators ({', '.join(finished)}) with operators that must run ({', '.join(running)}); "
                "a chain is either finished as a whole or runs as a whole"
            )
        finished_vertex[vertex.id] = all(flags)
    for vertex in graph.vertices:
        if not finished_vertex[vertex.id]:
            continue
        for edge in vertex.inputs:
            if not finished_vertex[edge.source]:
                upstream = graph.vertex(edge.source)
                raise RestoreRefused(
                    f"cannot restore from {metadata.location}: operator {upstream.uids[-1]!r} "
                    "would run in front of "
                    f"the fully finished {vertex.uids[0]!r}, which can receive no more records; remove it or "
                    "restore from a checkpoint taken before the downstream operators finished"
                )
    return sorted(orphaned)


def _fully_finished(entry: OperatorEntry | None) -> bool:
    return entry is not None and entry.fully_finished
