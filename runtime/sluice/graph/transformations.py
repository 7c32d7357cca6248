"""The logical graph the API builds: one node per operator call, with how each input is partitioned."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

OperatorFactory = Callable[[str], object]
"""Builds one subtask's operator, given the operator's resolved uid. The graph does not know the operator
type: the engine does, and names it when it creates one (`OperatorSpec.create`)."""


class PartitionKind(enum.Enum):
    FORWARD = "forward"
    HASH = "hash"
    REBALANCE = "rebalance"
    BROADCAST = "broadcast"


@dataclass(frozen=True)
class Partitioning:
    kind: PartitionKind
    key_selector: Callable[[Any], Any] | None = None

    @property
    def all_to_all(self) -> bool:
        return self.kind is not PartitionKind.FORWARD


@dataclass(eq=False)
class Transformation:
    id: int
    kind: str
    """What the node does: source, map, filter, flat_map, process, timestamps, reduce, window, sink."""
    name: str
    uid: str | None
    factory: OperatorFactory
    inputs: list[Input] = field(default_factory=list)
    parallelism: int | None = None
    stateful: bool = False
    location: str = ""
    """Where the user's pipeline made this node (file:line), for error messages."""
    side_outputs: dict[str, str] = field(default_factory=dict)
    """Side outputs the operator declared: tag name -> what it carries (dead letters, late data)."""
    free_side_outputs: bool = False
    """Its user function may emit to any tag (a process function's `ctx.output`)."""

    def declare_side_output(self, tag: str, meaning: str) -> None:
        """Records that the operator emits `meaning` on side output `tag`; one tag, one meaning."""
        known = self.side_outputs.get(tag)
        if known is not None and known != meaning:
            raise ValueError(
                f"{self.describe()}: side output {tag!r} would carry both {known} and {meaning}; "
                "give each its own OutputTag name"
            )
        self.side_outputs[tag] = meaning

    def describe(self) -> str:
        where = f" at {self.location}" if self.location else ""
        return f"{self.kind} operator {self.name!r}{where}"


@dataclass(frozen=True, eq=False)
class Input:
    node: Transformation
    partitioning: Partitioning | None
    """None: forward when the parallelism matches, rebalance otherwise."""
    tag: str | None = None
    """The side output of `node` this input reads; None for its main output."""
    side: int = 0
    """Which input of a two-input operator (connect, joins) this is: 0 the first, 1 the second."""
