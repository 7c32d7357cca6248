"""`a.connect(b)`: two streams into one two-input operator (co-process, or the broadcast state pattern)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sluice.api._callsite import user_call_site
from sluice.api._own_tag import refuse_output_to_own_tag
from sluice.engine.operators.broadcast import KeyedBroadcastProcessOperator
from sluice.engine.operators.co_process import CoProcessOperator, KeyedCoProcessOperator
from sluice.functions import CoProcessFunction, KeyedBroadcastProcessFunction, KeyedCoProcessFunction
from sluice.graph.transformations import Input, Partitioning, PartitionKind
from sluice.side_outputs import OutputTag, error_policy

if TYPE_CHECKING:
    from sluice.api.datastream import DataStream, OnError

KeySelector = Callable[[Any], Any]


def is_broadcast(stream: DataStream) -> bool:
    return all(p is not None and p.kind is PartitionKind.BROADCAST for _, p in stream._inputs)


def two_input_node(
    first: DataStream,
    second: DataStream,
    kind: str,
    uid: str | None,
    name: str | None,
    factory: Any,
    partitionings: tuple[Partitioning | None, Partitioning | None],
) -> DataStream:
    """Adds an operator with two logical inputs; each may be a union of several streams."""
    from sluice.api.datastream import DataStream

    env = first._env
    node = env._add(kind, name or uid or kind, uid, factory, [], stateful=True)
    node.inputs = [
        Input(n, partitionings[side] or p, None, side)
        for side, stream in enumerate((first, second))
        for n, p in stream._inputs
    ]
    return DataStream(env, [(node, None)])


class ConnectedStreams:
    """Two streams connected for one two-input operator: `a.connect(b)`."""

    def __init__(
        self,
        first: DataStream,
        second: DataStream,
        keys: tuple[KeySelector, KeySelector] | None = None,
    ) -> None:
        if second._env is not first._env:
            raise ValueError(
                f"connect at {user_call_site()}: both streams must come from the same StreamEnvironment"
            )
        self.first = first
        self.second = second
        self.keys = keys

    def key_by(self, key_a: KeySelector, key_b: KeySelector) -> ConnectedStreams:
        """Partitions both inputs by key (`key_a` for the first, `key_b` for the second) so that one
        key's records of both meet in one subtask, with one keyed state and timers."""
        if not callable(key_a) or not callable(key_b):
            raise TypeError(
                f"key_by at {user_call_site()}: connected streams need two key selectors, one per input "
                f"(key_by(key_a, key_b)), got {key_a!r} and {key_b!r}"
            )
        if is_broadcast(self.second):
            raise ValueError(
                f"key_by at {user_call_site()}: the second input is a broadcast stream; key the first one "
                "before connect: keyed.connect(rules.broadcast())"
            )
        return ConnectedStreams(self.first, self.second, (key_a, key_b))

    def process(
        self,
        fn: CoProcessFunction | KeyedCoProcessFunction | KeyedBroadcastProcessFunction,
        uid: str | None = None,
        name: str | None = None,
        on_error: OnError = "fail",
    ) -> DataStream:
        where = user_call_site()
        policy = error_policy(on_error, f"connect(...).process({name or uid or ''})")
        refuse_output_to_own_tag(fn, policy, f"connect(...).process({name or uid or ''}) at {where}")
        if isinstance(fn, KeyedBroadcastProcessFunction):
            stream = self._broadcast(fn, uid, name, policy, where)
        elif isinstance(fn, KeyedCoProcessFunction):
            stream = self._keyed(fn, uid, name, policy, where)
        elif isinstance(fn, CoProcessFunction):
            if is_broadcast(self.second) and self._first_key() is not None:
                raise TypeError(
                    f"connect(...).process at {where}: a keyed stream connected to a broadcast stream "
                    "needs a sluice.KeyedBroadcastProcessFunction"
                )
            stream = two_input_node(
                self.first,
                self.second,
                "co_process",
                uid,
                name,
                lambda u: CoProcessOperator(u, fn, policy),
                (None, None),
            )
        else:
            raise TypeError(
                f"connect(...).process at {where} needs a sluice.CoProcessFunction, "
                f"KeyedCoProcessFunction or KeyedBroadcastProcessFunction, got {type(fn).__name__}"
            )
        node = stream._node
        node.location = where
        node.free_side_outputs = not isinstance(fn, CoProcessFunction)
        if isinstance(policy, OutputTag):
            node.declare_side_output(policy.name, "dead letters")
        return stream

    def _first_key(self) -> KeySelector | None:
        from sluice.api.datastream import KeyedStream

        return self.first.key_selector if isinstance(self.first, KeyedStream) else None

    def _keyed(
        self, fn: KeyedCoProcessFunction, uid: str | None, name: str | None, policy: Any, where: str
    ) -> DataStream:
        from sluice.api.datastream import KeyedStream

        keys = self.keys
        if keys is None and isinstance(self.first, KeyedStream) and isinstance(self.second, KeyedStream):
            keys = (self.first.key_selector, self.second.key_selector)
        if keys is None:
            raise ValueError(
                f"connect(...).process at {where}: a KeyedCoProcessFunction needs both inputs keyed: "
                "a.connect(b).key_by(key_a, key_b), or connect two keyed streams"
            )
        key_a, key_b = keys
        return two_input_node(
            self.first,
            self.second,
            "co_process",
            uid,
            name,
            lambda u: KeyedCoProcessOperator(u, (key_a, key_b), fn, policy),
            (Partitioning(PartitionKind.HASH, key_a), Partitioning(PartitionKind.HASH, key_b)),
        )

    def _broadcast(
        self, fn: KeyedBroadcastProcessFunction, uid: str | None, name: str | None, policy: Any, where: str
    ) -> DataStream:
        if not is_broadcast(self.second):
            raise ValueError(
                f"connect(...).process at {where}: a KeyedBroadcastProcessFunction needs a broadcast "
                "stream as the second input, and this one is not: connect(rules.broadcast())"
            )
        key = self.keys[0] if self.keys is not None else self._first_key()
        if key is None:
            raise ValueError(
                f"connect(...).process at {where}: a KeyedBroadcastProcessFunction needs the first "
                "input keyed: events.key_by(...).connect(rules.broadcast())"
            )
        return two_input_node(
            self.first,
            self.second,
            "broadcast_process",
            uid,
            name,
            lambda u: KeyedBroadcastProcessOperator(u, key, fn, policy),
            (Partitioning(PartitionKind.HASH, key), None),
        )
