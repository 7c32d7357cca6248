"""The physical job graph: operators chained into vertices, vertices joined by edges.

An operator is chained to its predecessor when data can pass by a plain function call: it has exactly
one input, that input is forwarded (same parallelism), and the predecessor feeds nothing else. Each
vertex runs as `parallelism` subtasks; a POINTWISE edge joins subtask i to subtask i, an ALL_TO_ALL
edge joins every upstream subtask to every downstream one (hash, rebalance, broadcast).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TypeVar

import cloudpickle

from sluice.graph.transformations import OperatorFactory, Partitioning, PartitionKind, Transformation

OperatorT = TypeVar("OperatorT")

POINTWISE = "POINTWISE"
ALL_TO_ALL = "ALL_TO_ALL"


class GraphError(ValueError):
    """The pipeline cannot run as built; the message names the operator and the fix."""


@dataclass(frozen=True)
class OperatorSpec:
    uid: str
    name: str
    kind: str
    stateful: bool
    factory: OperatorFactory

    def create(self, kind: type[OperatorT]) -> OperatorT:
        """A fresh operator for one subtask; `kind` is the operator type the caller runs."""
        # Every subtask gets its own copy of the user's functions and connectors, as if each had been
        # shipped on its own: subtasks in one process must not share a sink's connection, say.
        factory: OperatorFactory = cloudpickle.loads(cloudpickle.dumps(self.factory))
        operator = factory(self.uid)
        if not isinstance(operator, kind):
            raise TypeError(
                f"the factory of operator {self.uid!r} built a {type(operator).__name__}, "
                f"not a {kind.__name__}"
            )
        return operator


@dataclass
class JobEdge:
    source: int
    target: int
    partitioning: Partitioning
    input_index: int
    """Position of this edge among the target vertex's inputs."""
    tag: str | None = None
    """The side output of the source vertex's last operator this edge carries; None: its main output."""
    side: int = 0
    """Which input of the target's two-input head operator it feeds (0 or 1); 0 for one-input heads."""

    @property
    def pattern(self) -> str:
        return ALL_TO_ALL if self.partitioning.all_to_all else POINTWISE


@dataclass
class JobVertex:
    id: int
    operators: list[OperatorSpec]
    parallelism: int
    max_parallelism: int
    inputs: list[JobEdge] = field(default_factory=list)
    outputs: list[JobEdge] = field(default_factory=list)
    state_backend: str = "heap"
    """Where its keyed operators keep keyed state: `heap` or `disk` (`sluice run --state-backend`)."""

    @property
    def name(self) -> str:
        return " -> ".join(op.uid for op in self.operators)

    @property
    def is_source(self) -> bool:
        return not self.inputs

    @property
    def uids(self) -> list[str]:
        return [op.uid for op in self.operators]


@dataclass
class JobGraph:
    name: str
    vertices: list[JobVertex]
    max_parallelism: int

    def vertex(self, vertex_id: int) -> JobVertex:
        return self.vertices[vertex_id]

    def operator_uids(self) -> list[str]:
        return [op.uid for v in self.vertices for op in v.operators]

    def use_state_backend(self, kind: str) -> None:
        """Every keyed operator of the job keeps its keyed state in backend `kind`."""
        for vertex in self.vertices:
            vertex.state_backend = kind


def finished_inputs(graph: JobGraph, vertex: JobVertex, fully_finished: set[str]) -> tuple[int, ...]:
    """The inputs of `vertex`'s two-input head operator whose every upstream vertex has fully finished
    (all operators in `fully_finished`): those inputs have ended and are not run again after a restore.
    Empty for a vertex with one input."""
    sides: dict[int, bool] = {}
    for edge in vertex.inputs:
        ended = all(uid in fully_finished for uid in graph.vertex(edge.source).uids)
        sides[edge.side] = sides.get(edge.side, True) and ended
    if len(sides) < 2:
        return ()
    return tuple(side for side, ended in sorted(sides.items()) if ended)


def build_job_graph(
    name: str, nodes: list[Transformation], default_parallelism: int, max_parallelism: int
) -> JobGraph:
    if not nodes:
        raise GraphError("the pipeline is empty: build(env) must add at least one source and a sink")
    uids = _assign_uids(nodes)
    parallelism = _parallelisms(nodes, default_parallelism, max_parallelism)
    partitionings = {node.id: _input_partitionings(node, parallelism) for node in nodes}
    consumers = Counter(inp.node.id for node in nodes for inp in node.inputs)
    vertex_of: dict[int, JobVertex] = {}
    vertices: list[JobVertex] = []
    for node in nodes:
        spec = OperatorSpec(uids[node.id], node.name, node.kind, node.stateful, node.factory)
        if _chains_to_its_input(node, partitionings[node.id], consumers):
            vertex_of[node.id] = vertex_of[node.inputs[0].node.id]
            vertex_of[node.id].operators.append(spec)
            continue
        vertex = JobVertex(len(vertices), [spec], parallelism[node.id], max_parallelism)
        vertices.append(vertex)
        vertex_of[node.id] = vertex
        for index, (inp, partitioning) in enumerate(zip(node.inputs, partitionings[node.id], strict=True)):
            edge = JobEdge(vertex_of[inp.node.id].id, vertex.id, partitioning, index, inp.tag, inp.side)
            vertex.inputs.append(edge)
            vertices[edge.source].outputs.append(edge)
    for node in nodes:
        if not consumers[node.id] and node.kind != "sink":
            raise GraphError(
                f"{node.describe()}: its output goes nowhere; end the pipeline with sink_to(...)"
            )
    return JobGraph(name, vertices, max_parallelism)


def _parallelisms(nodes: list[Transformation], default: int, max_parallelism: int) -> dict[int, int]:
    parallelism: dict[int, int] = {}
    for node in nodes:
        side = node.inputs[0].tag is not None if node.inputs else False
        # A side output runs beside its operator unless told otherwise: forwarded, no reshuffle.
        inherited = parallelism[node.inputs[0].node.id] if side else default
        parallelism[node.id] = node.parallelism or inherited
    for node in nodes:
        if parallelism[node.id] > max_parallelism:
            raise GraphError(
                f"{node.describe()}: parallelism {parallelism[node.id]} exceeds the max parallelism "
                f"{max_parallelism}; raise max_parallelism or lower the parallelism"
            )
    return parallelism


def _input_partitionings(node: Transformation, parallelism: dict[int, int]) -> list[Partitioning]:
    """Each input's partitioning; one not chosen is forward at equal parallelism, rebalance otherwise."""
    resolved = []
    for inp in node.inputs:
        same = parallelism[inp.node.id] == parallelism[node.id]
        if inp.partitioning is None:
            resolved.append(Partitioning(PartitionKind.FORWARD if same else PartitionKind.REBALANCE))
        elif inp.partitioning.kind is PartitionKind.FORWARD and not same:
            raise GraphError(
                f"{node.describe()}: forward() needs the same parallelism on both sides "
                f"({parallelism[inp.node.id]} vs {parallelism[node.id]}); use rebalance() instead"
            )
        else:
            resolved.append(inp.partitioning)
    return resolved


def _chains_to_its_input(
    node: Transformation, partitionings: list[Partitioning], consumers: Counter[int]
) -> bool:
    """One forwarded input from a predecessor that feeds nothing else: a plain function call suffices."""
    return (
        len(node.inputs) == 1
        and node.inputs[0].tag is None
        and partitionings[0].kind is PartitionKind.FORWARD
        and consumers[node.inputs[0].node.id] == 1
    )


def _assign_uids(nodes: list[Transformation]) -> dict[int, str]:
    seen: dict[str, Transformation] = {}
    uids: dict[int, str] = {}
    for node in nodes:
        if node.uid is None:
            if node.stateful:
                raise GraphError(
                    f'{node.describe()} holds state and needs a uid: pass uid="..." so its state can '
                    "be found again after a restart or an upgrade"
                )
            continue
        if not node.uid or "/" in node.uid:
            raise GraphError(f"{node.describe()}: uid {node.uid!r} must be a non-empty name without '/'")
        if node.uid in seen:
            raise GraphError(
                f"duplicate uid {node.uid!r}: used by {seen[node.uid].describe()} and by {node.describe()}; "
                "every operator needs its own uid"
            )
        seen[node.uid] = node
        uids[node.id] = node.uid
    for node in nodes:
        if node.id not in uids:
            auto = f"{node.kind}-{node.id}"
            while auto in seen:
                auto += "_"
            seen[auto] = node
            uids[node.id] = auto
    return uids
