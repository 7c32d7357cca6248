"""The graph a pipeline builds: its nodes in the order the API added them, each with the line of the
user's pipeline that added it.

A StreamEnvironment owns one, and every stream made from it adds to it. It knows nodes and never the
stream classes, so the modules that say what a step adds (`_windowing`, `_two_input`, `_joining`) build
with it alone, below the stream classes that call them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sluice.api._callsite import user_call_site
from sluice.engine.operators.basic import SideOutputOperator
from sluice.graph.transformations import Input, OperatorFactory, Partitioning, PartitionKind, Transformation

KeySelector = Callable[[Any], Any]
"""A function of a record giving its key: what a keyed stream is partitioned by."""

Inputs = list[tuple[Transformation, Partitioning | None]]
"""What a stream is: the nodes whose output it carries (several for a union), each with how it is
partitioned to the next operator (None: forward when the parallelism matches, rebalance otherwise)."""


class PipelineGraph:
    def __init__(self) -> None:
        self.nodes: list[Transformation] = []

    def add(
        self, kind: str, name: str, uid: str | None, factory: OperatorFactory, inputs: Inputs, stateful: bool
    ) -> Transformation:
        """A node reading `inputs` (none for a source)."""
        node = Transformation(
            id=len(self.nodes),
            kind=kind,
            name=name,
            uid=uid,
            factory=factory,
            inputs=[Input(n, p) for n, p in inputs],
            stateful=stateful,
            location=user_call_site(),
        )
        self.nodes.append(node)
        return node

    def add_two_input(
        self,
        kind: str,
        uid: str | None,
        name: str | None,
        factory: OperatorFactory,
        sides: tuple[Inputs, Inputs],
        partitionings: tuple[Partitioning | None, Partitioning | None],
    ) -> Transformation:
        """An operator with two logical inputs, each of which may be a union of several streams; a
        partitioning given for a side replaces the one its streams carry."""
        node = self.add(kind, name or uid or kind, uid, factory, [], stateful=True)
        node.inputs = [
            Input(n, partitionings[side] or p, None, side)
            for side, inputs in enumerate(sides)
            for n, p in inputs
        ]
        return node

    def add_side_output(self, node: Transformation, tag: str) -> Transformation:
        """A node carrying what `node` sends to its side output `tag`."""
        side = self.add("side_output", f"{node.name}[{tag}]", None, SideOutputOperator, [], stateful=False)
        side.inputs = [Input(node, None, tag)]
        return side


def is_broadcast(inputs: Inputs) -> bool:
    """Whether every stream of `inputs` is sent to all subtasks of the next operator."""
    return all(p is not None and p.kind is PartitionKind.BROADCAST for _, p in inputs)
