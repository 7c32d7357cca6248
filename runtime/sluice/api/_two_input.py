"""What `a.connect(b)` adds: one two-input operator for the kind of function given (co-process, keyed
co-process, or the broadcast state pattern), after checking the inputs are partitioned as it needs."""

from __future__ import annotations

import dataclasses

from sluice.api._callsite import user_call_site
from sluice.api._graph import Inputs, KeySelector, PipelineGraph, is_broadcast
from sluice.api._own_tag import refuse_output_to_own_tag
from sluice.engine.operators.broadcast import KeyedBroadcastProcessOperator
from sluice.engine.operators.co_process import CoProcessOperator, KeyedCoProcessOperator
from sluice.functions import CoProcessFunction, KeyedBroadcastProcessFunction, KeyedCoProcessFunction
from sluice.graph.transformations import Partitioning, PartitionKind, Transformation
from sluice.side_outputs import OutputTag, error_policy


@dataclasses.dataclass(frozen=True)
class Side:
    """One input of a two-input operator: the streams it reads, and their key if it is a keyed stream."""

    inputs: Inputs
    key: KeySelector | None

    @property
    def is_broadcast(self) -> bool:
        return is_broadcast(self.inputs)


def check_keys(key_a: object, key_b: object, second: Side) -> None:
    """The checks of `connect(...).key_by(key_a, key_b)`."""
    if not callable(key_a) or not callable(key_b):
        raise TypeError(
            f"key_by at {user_call_site()}: connected streams need two key selectors, one per input "
            f"(key_by(key_a, key_b)), got {key_a!r} and {key_b!r}"
        )
    if second.is_broadcast:
        raise ValueError(
            f"key_by at {user_call_site()}: the second input is a broadcast stream; key the first one "
            "before connect: keyed.connect(rules.broadcast())"
        )


def add_process(
    graph: PipelineGraph,
    sides: tuple[Side, Side],
    keys: tuple[KeySelector, KeySelector] | None,
    fn: object,
    uid: str | None,
    name: str | None,
    on_error: object,
) -> Transformation:
    """The operator of `connect(...).process(fn)`; `keys` are those given to `connect(...).key_by`."""
    where = user_call_site()
    policy = error_policy(on_error, f"connect(...).process({name or uid or ''})")
    refuse_output_to_own_tag(fn, policy, f"connect(...).process({name or uid or ''}) at {where}")
    first, second = sides
    if isinstance(fn, KeyedBroadcastProcessFunction):
        node = _broadcast(graph, sides, keys, fn, uid, name, policy, where)
    elif isinstance(fn, KeyedCoProcessFunction):
        node = _keyed(graph, sides, keys, fn, uid, name, policy, where)
    elif isinstance(fn, CoProcessFunction):
        if second.is_broadcast and first.key is not None:
            raise TypeError(
                f"connect(...).process at {where}: a keyed stream connected to a broadcast stream "
                "needs a sluice.KeyedBroadcastProcessFunction"
            )
        node = graph.add_two_input(
            "co_process",
            uid,
            name,
            lambda u: CoProcessOperator(u, fn, policy),
            (first.inputs, second.inputs),
            (None, None),
        )
    else:
        raise TypeError(
            f"connect(...).process at {where} needs a sluice.CoProcessFunction, "
            f"KeyedCoProcessFunction or KeyedBroadcastProcessFunction, got {type(fn).__name__}"
        )
    node.location = where
    node.free_side_outputs = not isinstance(fn, CoProcessFunction)
    if isinstance(policy, OutputTag):
        node.declare_side_output(policy.name, "dead letters")
    return node


def _keyed(
    graph: PipelineGraph,
    sides: tuple[Side, Side],
    keys: tuple[KeySelector, KeySelector] | None,
    fn: KeyedCoProcessFunction,
    uid: str | None,
    name: str | None,
    policy: str | OutputTag,
    where: str,
) -> Transformation:
    first, second = sides
    if keys is None and first.key is not None and second.key is not None:
        keys = (first.key, second.key)
    if keys is None:
        raise ValueError(
            f"connect(...).process at {where}: a KeyedCoProcessFunction needs both inputs keyed: "
            "a.connect(b).key_by(key_a, key_b), or connect two keyed streams"
        )
    key_a, key_b = keys
    return graph.add_two_input(
        "co_process",
        uid,
        name,
        lambda u: KeyedCoProcessOperator(u, (key_a, key_b), fn, policy),
        (first.inputs, second.inputs),
        (Partitioning(PartitionKind.HASH, key_a), Partitioning(PartitionKind.HASH, key_b)),
    )


def _broadcast(
    graph: PipelineGraph,
    sides: tuple[Side, Side],
    keys: tuple[KeySelector, KeySelector] | None,
    fn: KeyedBroadcastProcessFunction,
    uid: str | None,
    name: str | None,
    policy: str | OutputTag,
    where: str,
) -> Transformation:
    first, second = sides
    if not second.is_broadcast:
        raise ValueError(
            f"connect(...).process at {where}: a KeyedBroadcastProcessFunction needs a broadcast "
            "stream as the second input, and this one is not: connect(rules.broadcast())"
        )
    key = keys[0] if keys is not None else first.key
    if key is None:
        raise ValueError(
            f"connect(...).process at {where}: a KeyedBroadcastProcessFunction needs the first "
            "input keyed: events.key_by(...).connect(rules.broadcast())"
        )
    return graph.add_two_input(
        "broadcast_process",
        uid,
        name,
        lambda u: KeyedBroadcastProcessOperator(u, key, fn, policy),
        (first.inputs, second.inputs),
        (Partitioning(PartitionKind.HASH, key), None),
    )
