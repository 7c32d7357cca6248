"""Which channels a subtask has: the same answer on both ends of every channel.

The input channels of subtask s of a vertex are laid out edge by edge (in input order): a POINTWISE
edge contributes one channel (from upstream subtask s), an ALL_TO_ALL edge one channel per upstream
subtask. A sender finds its channel index at the receiver with `channel_index`.
"""

from __future__ import annotations

from sluice.graph.jobgraph import POINTWISE, JobEdge, JobGraph, JobVertex

SubtaskId = tuple[int, int]
"""(vertex id, subtask index)."""


def input_channels(graph: JobGraph, vertex: JobVertex, subtask: int) -> list[tuple[JobEdge, int]]:
    layout: list[tuple[JobEdge, int]] = []
    for edge in vertex.inputs:
        if edge.pattern == POINTWISE:
            layout.append((edge, subtask))
        else:
            layout.extend((edge, up) for up in range(graph.vertex(edge.source).parallelism))
    return layout


def output_targets(graph: JobGraph, edge: JobEdge, subtask: int) -> list[int]:
    if edge.pattern == POINTWISE:
        return [subtask]
    return list(range(graph.vertex(edge.target).parallelism))


def channel_index(graph: JobGraph, edge: JobEdge, sender: int) -> int:
    """The index, among the target subtask's input channels, of the channel from `sender` over `edge`."""
    target = graph.vertex(edge.target)
    offset = 0
    for earlier in target.inputs:
        if earlier is edge:
            return offset + (0 if edge.pattern == POINTWISE else sender)
        offset += 1 if earlier.pattern == POINTWISE else graph.vertex(earlier.source).parallelism
    raise ValueError(f"edge {edge} is not an input of vertex {target.id}")


def placement(graph: JobGraph, taskmanagers: int) -> dict[SubtaskId, int]:
    """Subtask i of every vertex runs on TaskManager i % taskmanagers, so forward edges stay local."""
    return {(v.id, s): s % taskmanagers for v in graph.vertices for s in range(v.parallelism)}
