"""The fluent pipeline API: DataStream and KeyedStream (WindowedStream: `sluice.api.windowed`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sluice.api._callsite import user_call_site
from sluice.api._own_tag import refuse_output_to_own_tag
from sluice.connectors.base import Sink, TwoPhaseCommitSink
from sluice.engine.operators.basic import (
    FilterOperator,
    FlatMapOperator,
    MapOperator,
    ProcessOperator,
    SideOutputOperator,
)
from sluice.engine.operators.keyed import KeyedProcessOperator, KeyedReduceOperator
from sluice.engine.operators.sink import SinkOperator, TwoPhaseCommitSinkOperator
from sluice.engine.operators.timestamps import TimestampsOperator
from sluice.functions import (
    FilterFunction,
    FlatMapFunction,
    Function,
    KeyedProcessFunction,
    MapFunction,
    ProcessFunction,
)
from sluice.graph.transformations import Input, Partitioning, PartitionKind, Transformation
from sluice.side_outputs import OutputTag, error_policy

if TYPE_CHECKING:
    from sluice.api.connected import ConnectedStreams
    from sluice.api.environment import StreamEnvironment
    from sluice.api.joins import IntervalJoinBuilder, JoinedStreams
    from sluice.api.windowed import WindowedStream
    from sluice.windows import WindowAssigner

_Inputs = list[tuple[Transformation, Partitioning | None]]
OnError = str | OutputTag
"""What a raising user function does to its record: "fail" the task, "skip" it, or an OutputTag for
dead letters (`sluice.FailedRecord`)."""


class DataStream:
    def __init__(self, env: StreamEnvironment, inputs: _Inputs) -> None:
        self._env = env
        self._inputs = inputs

    # -- node-level settings ------------------------------------------------------------------------

    @property
    def _node(self) -> Transformation:
        if len(self._inputs) != 1:
            raise ValueError("this stream is a union of several streams; apply an operator to it first")
        return self._inputs[0][0]

    def set_parallelism(self, parallelism: int) -> DataStream:
        if parallelism < 1:
            raise ValueError(f"{self._node.describe()}: parallelism must be at least 1, got {parallelism}")
        self._node.parallelism = parallelism
        return self

    # -- partitioning ---------------------------------------------------------------------------------

    def _repartition(self, partitioning: Partitioning) -> DataStream:
        return DataStream(self._env, [(node, partitioning) for node, _ in self._inputs])

    def rebalance(self) -> DataStream:
        return self._repartition(Partitioning(PartitionKind.REBALANCE))

    def broadcast(self) -> DataStream:
        return self._repartition(Partitioning(PartitionKind.BROADCAST))

    def forward(self) -> DataStream:
        return self._repartition(Partitioning(PartitionKind.FORWARD))

    def key_by(self, key_selector: Callable[[Any], Any]) -> KeyedStream:
        partitioning = Partitioning(PartitionKind.HASH, key_selector)
        return KeyedStream(self._env, [(node, partitioning) for node, _ in self._inputs], key_selector)

    def union(self, *others: DataStream) -> DataStream:
        inputs = list(self._inputs)
        for other in others:
            if other._env is not self._env:
                raise ValueError("union: all streams must come from the same StreamEnvironment")
            inputs.extend(other._inputs)
        return DataStream(self._env, inputs)

    # -- two inputs -----------------------------------------------------------------------------------

    def connect(self, other: DataStream) -> ConnectedStreams:
        """This stream and `other` into one two-input operator: `.process(CoProcessFunction)`;
        `.key_by(key_a, key_b).process(KeyedCoProcessFunction)`; or, on a keyed stream,
        `connect(rules.broadcast()).process(KeyedBroadcastProcessFunction)` (docs/multi-input.md)."""
        from sluice.api.connected import ConnectedStreams

        if not isinstance(other, DataStream):
            raise TypeError(f"connect needs a DataStream, got {type(other).__name__}")
        return ConnectedStreams(self, other)

    def join(self, other: DataStream) -> JoinedStreams:
        """A window join: `a.join(b).where(key_a).equal_to(key_b).window(assigner).apply(fn, uid=...)`."""
        from sluice.api.joins import JoinedStreams

        if not isinstance(other, DataStream):
            raise TypeError(f"join needs a DataStream, got {type(other).__name__}")
        return JoinedStreams(self, other)

    # -- operators ------------------------------------------------------------------------------------

    def _then(self, kind: str, uid: str | None, name: str | None, factory: Any, stateful: bool) -> DataStream:
        node = self._env._add(kind, name or uid or kind, uid, factory, list(self._inputs), stateful)
        return DataStream(self._env, [(node, None)])

    def _then_guarded(
        self, kind: str, uid: str | None, name: str | None, factory: Any, stateful: bool, on_error: object
    ) -> DataStream:
        policy = error_policy(on_error, f"{kind}({name or uid or ''})")
        stream = self._then(kind, uid, name, lambda u: factory(u, policy), stateful)
        if isinstance(policy, OutputTag):
            stream._node.declare_side_output(policy.name, "dead letters")
        return stream

    def get_side_output(self, tag: OutputTag) -> DataStream:
        """The records the operator that made this stream sent to side output `tag`."""
        if not isinstance(tag, OutputTag):
            raise TypeError(f"get_side_output needs a sluice.OutputTag, got {tag!r}")
        node = self._node
        if tag.name not in node.side_outputs and not node.free_side_outputs:
            declared = ", ".join(repr(t) for t in sorted(node.side_outputs)) or "none"
            raise ValueError(
                f"{node.describe()} has no side output {tag.name!r} (it declares: {declared}); side "
                "outputs come from on_error=OutputTag(...), side_output_late_data(...) on a window, "
                "or ctx.output(...) in a KeyedProcessFunction"
            )
        side = self._env._add(
            "side_output", f"{node.name}[{tag.name}]", None, SideOutputOperator, [], stateful=False
        )
        side.inputs = [Input(node, None, tag.name)]
        return DataStream(self._env, [(side, None)])

    def map(
        self,
        fn: Callable[[Any], Any] | MapFunction,
        uid: str | None = None,
        name: str | None = None,
        on_error: OnError = "fail",
    ) -> DataStream:
        return self._then_guarded(
            "map", uid, name, lambda u, p: MapOperator(u, fn, p), isinstance(fn, Function), on_error
        )

    def filter(
        self,
        fn: Callable[[Any], bool] | FilterFunction,
        uid: str | None = None,
        name: str | None = None,
        on_error: OnError = "fail",
    ) -> DataStream:
        return self._then_guarded(
            "filter", uid, name, lambda u, p: FilterOperator(u, fn, p), isinstance(fn, Function), on_error
        )

    def flat_map(
        self,
        fn: Callable[[Any], Any] | FlatMapFunction,
        uid: str | None = None,
        name: str | None = None,
        on_error: OnError = "fail",
    ) -> DataStream:
        return self._then_guarded(
            "flat_map", uid, name, lambda u, p: FlatMapOperator(u, fn, p), isinstance(fn, Function), on_error
        )

    def process(
        self,
        fn: ProcessFunction,
        uid: str | None = None,
        name: str | None = None,
        on_error: OnError = "fail",
    ) -> DataStream:
        return self._then_guarded(
            "process", uid, name, lambda u, p: ProcessOperator(u, fn, p), True, on_error
        )

    def assign_timestamps(
        self,
        extract: Callable[[Any], int],
        max_out_of_orderness_ms: int = 0,
        uid: str | None = None,
        name: str | None = None,
        idleness_ms: int | None = None,
    ) -> DataStream:
        if max_out_of_orderness_ms < 0:
            raise ValueError(
                f"assign_timestamps: max_out_of_orderness_ms must be >= 0, got {max_out_of_orderness_ms}"
            )
        return self._then(
            "timestamps",
            uid,
            name,
            lambda u: TimestampsOperator(u, extract, max_out_of_orderness_ms, idleness_ms),
            False,
        )

    def sink_to(
        self, sink: Sink | TwoPhaseCommitSink[Any, Any], uid: str | None = None, name: str | None = None
    ) -> DataStream:
        if isinstance(sink, TwoPhaseCommitSink):
            return self._then("sink", uid, name, lambda u: TwoPhaseCommitSinkOperator(u, sink), True)
        if isinstance(sink, Sink):
            return self._then("sink", uid, name, lambda u: SinkOperator(u, sink), True)
        raise TypeError(f"sink_to needs a sluice Sink or TwoPhaseCommitSink, got {type(sink).__name__}")


class KeyedStream(DataStream):
    def __init__(self, env: StreamEnvironment, inputs: _Inputs, key_selector: Callable[[Any], Any]) -> None:
        super().__init__(env, inputs)
        self.key_selector = key_selector

    def reduce(
        self, fn: Callable[[Any, Any], Any], uid: str | None = None, name: str | None = None
    ) -> DataStream:
        key = self.key_selector
        return self._then("reduce", uid, name, lambda u: KeyedReduceOperator(u, key, fn), True)

    def process(
        self,
        fn: KeyedProcessFunction | ProcessFunction,
        uid: str | None = None,
        name: str | None = None,
        on_error: OnError = "fail",
    ) -> DataStream:
        if not isinstance(fn, KeyedProcessFunction):
            raise TypeError("process() on a keyed stream needs a sluice.KeyedProcessFunction")
        refuse_output_to_own_tag(fn, on_error, f"process({name or uid or ''}) at {user_call_site()}")
        key = self.key_selector
        stream = self._then_guarded(
            "process", uid, name, lambda u, p: KeyedProcessOperator(u, key, fn, p), True, on_error
        )
        stream._node.free_side_outputs = True  # ctx.output(tag, value) may name any tag
        return stream

    def interval_join(self, other: KeyedStream) -> IntervalJoinBuilder:
        """Pairs of this stream's and `other`'s records with the same key, close in time:
        `.between(lower_ms, upper_ms).process(fn, uid=...)` (docs/multi-input.md)."""
        from sluice.api._callsite import user_call_site
        from sluice.api.joins import IntervalJoinBuilder

        if not isinstance(other, KeyedStream):
            raise TypeError(
                f"interval_join at {user_call_site()} needs a keyed stream on the right too: "
                "a.key_by(key_a).interval_join(b.key_by(key_b))"
            )
        return IntervalJoinBuilder(self, other)

    def window(self, assigner: WindowAssigner) -> WindowedStream:
        from sluice.api.windowed import WindowedStream

        return WindowedStream(self, assigner)
