"""Job graphs built directly from vertices and edges, for tests of the planning and validation code."""

from __future__ import annotations

from sluice.graph.jobgraph import JobEdge, JobGraph, JobVertex, OperatorSpec
from sluice.graph.transformations import Partitioning, PartitionKind


def _no_operator(uid: str) -> object:
    raise AssertionError(f"the code under test should not create operator {uid!r}")


def spec(uid: str) -> OperatorSpec:
    return OperatorSpec(uid=uid, name=uid, kind="map", stateful=True, factory=_no_operator)


def graph(
    vertices: list[tuple[list[str], int]],
    edges: list[tuple[int, int, PartitionKind]],
    max_parallelism: int = 128,
) -> JobGraph:
    """`vertices`: (operator uids, parallelism) per vertex, ids by position; `edges`: (from, to, kind)."""
    built = [
        JobVertex(i, [spec(u) for u in uids], p, max_parallelism) for i, (uids, p) in enumerate(vertices)
    ]
    for source, target, kind in edges:
        edge = JobEdge(source, target, Partitioning(kind), len(built[target].inputs))
        built[target].inputs.append(edge)
        built[source].outputs.append(edge)
    return JobGraph("test", built, max_parallelism)
