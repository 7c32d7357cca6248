"""The fluent pipeline API: every kind of stream a pipeline passes through, from a source to its sinks.

`env.from_source(...)` gives a DataStream. `key_by` makes it a KeyedStream, which `window` cuts into a
WindowedStream and `interval_join` pairs with another keyed stream; `connect` puts two streams into one
two-input operator (ConnectedStreams); `join` starts a window join (JoinedStreams). Each of these ends in
a DataStream again. Why they share this module, and where what each step adds lives: `sluice.api`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sluice.api._callsite import user_call_site
from sluice.api._graph import Inputs, KeySelector, PipelineGraph
from sluice.api._joining import (
    JoinFn,
    PairsOfWindow,
    SideKey,
    Tag,
    add_interval_join,
    check_assigner,
    check_bounds,
    check_key,
    check_pair_function,
)
from sluice.api._own_tag import refuse_output_to_own_tag
from sluice.api._two_input import Side, add_process, check_keys
from sluice.api._windowing import NO_LATENESS, Lateness, add_window, check_aggregate
from sluice.connectors.base import Sink, TwoPhaseCommitSink
from sluice.engine.operators.basic import FilterOperator, FlatMapOperator, MapOperator, ProcessOperator
from sluice.engine.operators.keyed import KeyedProcessOperator, KeyedReduceOperator
from sluice.engine.operators.sink import SinkOperator, TwoPhaseCommitSinkOperator
from sluice.engine.operators.timestamps import TimestampsOperator
from sluice.functions import (
    AggregateFunction,
    CoProcessFunction,
    FilterFunction,
    FlatMapFunction,
    Function,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    MapFunction,
    ProcessFunction,
    ProcessJoinFunction,
    ProcessWindowFunction,
)
from sluice.graph.transformations import OperatorFactory, Partitioning, PartitionKind, Transformation
from sluice.side_outputs import OutputTag, error_policy
from sluice.windows import WindowAssigner

OnError = str | OutputTag
"""What a raising user function does to its record: "fail" the task, "skip" it, or an OutputTag for
dead letters (`sluice.FailedRecord`)."""


class DataStream:
    def __init__(self, graph: PipelineGraph, inputs: Inputs) -> None:
        self._graph = graph
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
        return DataStream(self._graph, [(node, partitioning) for node, _ in self._inputs])

    def rebalance(self) -> DataStream:
        return self._repartition(Partitioning(PartitionKind.REBALANCE))

    def broadcast(self) -> DataStream:
        return self._repartition(Partitioning(PartitionKind.BROADCAST))

    def forward(self) -> DataStream:
        return self._repartition(Partitioning(PartitionKind.FORWARD))

    def key_by(self, key_selector: KeySelector) -> KeyedStream:
        partitioning = Partitioning(PartitionKind.HASH, key_selector)
        return KeyedStream(self._graph, [(node, partitioning) for node, _ in self._inputs], key_selector)

    def union(self, *others: DataStream) -> DataStream:
        inputs = list(self._inputs)
        for other in others:
            if other._graph is not self._graph:
                raise ValueError("union: all streams must come from the same StreamEnvironment")
            inputs.extend(other._inputs)
        return DataStream(self._graph, inputs)

    # -- two inputs -----------------------------------------------------------------------------------

    def connect(self, other: DataStream) -> ConnectedStreams:
        """This stream and `other` into one two-input operator: `.process(CoProcessFunction)`;
        `.key_by(key_a, key_b).process(KeyedCoProcessFunction)`; or, on a keyed stream,
        `connect(rules.broadcast()).process(KeyedBroadcastProcessFunction)` (docs/multi-input.md)."""
        if not isinstance(other, DataStream):
            raise TypeError(f"connect needs a DataStream, got {type(other).__name__}")
        return ConnectedStreams(self, other)

    def join(self, other: DataStream) -> JoinedStreams:
        """A window join: `a.join(b).where(key_a).equal_to(key_b).window(assigner).apply(fn, uid=...)`."""
        if not isinstance(other, DataStream):
            raise TypeError(f"join needs a DataStream, got {type(other).__name__}")
        return JoinedStreams(self, other)

    def _side(self) -> Side:
        """This stream as one input of a two-input operator."""
        return Side(self._inputs, None)

    # -- operators ------------------------------------------------------------------------------------

    def _then(
        self, kind: str, uid: str | None, name: str | None, factory: OperatorFactory, stateful: bool
    ) -> DataStream:
        return self._of(
            self._graph.add(kind, name or uid or kind, uid, factory, list(self._inputs), stateful)
        )

    def _then_guarded(
        self,
        kind: str,
        uid: str | None,
        name: str | None,
        factory: Callable[[str, OnError], object],
        stateful: bool,
        on_error: object,
    ) -> DataStream:
        """An operator whose user function may raise: `factory` also takes what to do then (`on_error`)."""
        policy = error_policy(on_error, f"{kind}({name or uid or ''})")
        stream = self._then(kind, uid, name, lambda u: factory(u, policy), stateful)
        if isinstance(policy, OutputTag):
            stream._node.declare_side_output(policy.name, "dead letters")
        return stream

    def _of(self, node: Transformation) -> DataStream:
        """The output of `node`, a new operator of this stream's pipeline."""
        return DataStream(self._graph, [(node, None)])

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
        return self._of(self._graph.add_side_output(node, tag.name))

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
    def __init__(self, graph: PipelineGraph, inputs: Inputs, key_selector: KeySelector) -> None:
        super().__init__(graph, inputs)
        self.key_selector = key_selector

    def _side(self) -> Side:
        return Side(self._inputs, self.key_selector)

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
        if not isinstance(other, KeyedStream):
            raise TypeError(
                f"interval_join at {user_call_site()} needs a keyed stream on the right too: "
                "a.key_by(key_a).interval_join(b.key_by(key_b))"
            )
        return IntervalJoinBuilder(self, other)

    def window(self, assigner: WindowAssigner) -> WindowedStream:
        return WindowedStream(self, assigner)


class WindowedStream:
    """A keyed stream cut into event-time windows (`KeyedStream.window`), and what runs on each window."""

    def __init__(
        self, keyed: KeyedStream, assigner: WindowAssigner, lateness: Lateness = NO_LATENESS
    ) -> None:
        self._keyed = keyed
        self._assigner = assigner
        self._lateness = lateness

    def allowed_lateness_millis(self, ms: int) -> WindowedStream:
        """Keeps each window `ms` past its end: a record that arrives meanwhile fires it again."""
        return WindowedStream(self._keyed, self._assigner, self._lateness.allowing(ms))

    def side_output_late_data(self, tag: OutputTag) -> WindowedStream:
        """Records too late for every window they belong to go to side output `tag` instead of being
        dropped; read them with `get_side_output(tag)` on the stream the window returns."""
        return WindowedStream(self._keyed, self._assigner, self._lateness.sending_late_data_to(tag))

    def reduce(
        self, fn: Callable[[Any, Any], Any], uid: str | None = None, name: str | None = None
    ) -> DataStream:
        return self._window(uid, name, reduce=fn)

    def aggregate(self, fn: AggregateFunction, uid: str | None = None, name: str | None = None) -> DataStream:
        check_aggregate(fn, self._assigner)
        return self._window(uid, name, aggregate=fn)

    def process(
        self, fn: ProcessWindowFunction, uid: str | None = None, name: str | None = None
    ) -> DataStream:
        if not isinstance(fn, ProcessWindowFunction):
            raise TypeError("process() on a windowed stream needs a sluice.ProcessWindowFunction")
        return self._window(uid, name, process=fn)

    def _window(self, uid: str | None, name: str | None, **function: Any) -> DataStream:
        keyed = self._keyed
        node = add_window(
            keyed._graph,
            keyed._inputs,
            keyed.key_selector,
            self._assigner,
            self._lateness,
            uid,
            name,
            function,
        )
        return keyed._of(node)


class ConnectedStreams:
    """Two streams connected for one two-input operator: `a.connect(b)`."""

    def __init__(
        self, first: DataStream, second: DataStream, keys: tuple[KeySelector, KeySelector] | None = None
    ) -> None:
        if second._graph is not first._graph:
            raise ValueError(
                f"connect at {user_call_site()}: both streams must come from the same StreamEnvironment"
            )
        self.first = first
        self.second = second
        self.keys = keys

    def key_by(self, key_a: KeySelector, key_b: KeySelector) -> ConnectedStreams:
        """Partitions both inputs by key (`key_a` for the first, `key_b` for the second) so that one
        key's records of both meet in one subtask, with one keyed state and timers."""
        check_keys(key_a, key_b, self.second._side())
        return ConnectedStreams(self.first, self.second, (key_a, key_b))

    def process(
        self,
        fn: CoProcessFunction | KeyedCoProcessFunction | KeyedBroadcastProcessFunction,
        uid: str | None = None,
        name: str | None = None,
        on_error: OnError = "fail",
    ) -> DataStream:
        sides = (self.first._side(), self.second._side())
        return self.first._of(add_process(self.first._graph, sides, self.keys, fn, uid, name, on_error))


class JoinedStreams:
    """`a.join(b)`: say the key of each side with `where` and `equal_to`, then the window."""

    def __init__(self, left: DataStream, right: DataStream, key_left: KeySelector | None = None) -> None:
        if left._graph is not right._graph:
            raise ValueError(
                f"join at {user_call_site()}: both streams must come from the same StreamEnvironment"
            )
        self._left = left
        self._right = right
        self._key_left = key_left

    def where(self, key_left: KeySelector) -> JoinedStreams:
        check_key(key_left, "join(...).where")
        return JoinedStreams(self._left, self._right, key_left)

    def equal_to(self, key_right: KeySelector) -> JoinedKeys:
        check_key(key_right, "join(...).equal_to")
        if self._key_left is None:
            raise ValueError(
                f"join(...).equal_to at {user_call_site()}: give the left key first: "
                "a.join(b).where(key_a).equal_to(key_b)"
            )
        return JoinedKeys(self._left, self._right, self._key_left, key_right)


class JoinedKeys:
    def __init__(
        self, left: DataStream, right: DataStream, key_left: KeySelector, key_right: KeySelector
    ) -> None:
        self._left, self._right = left, right
        self._keys = (key_left, key_right)

    def window(self, assigner: WindowAssigner) -> WindowJoin:
        check_assigner(assigner)
        return WindowJoin(self._left, self._right, self._keys, assigner)


class WindowJoin:
    def __init__(
        self,
        left: DataStream,
        right: DataStream,
        keys: tuple[KeySelector, KeySelector],
        assigner: WindowAssigner,
    ) -> None:
        self._left, self._right = left, right
        self._keys = keys
        self._assigner = assigner

    def apply(self, fn: JoinFn, uid: str | None = None, name: str | None = None) -> DataStream:
        """An inner join: `fn(left, right)` for every pair of one key in one window, when it fires;
        the results carry the window's last timestamp (`end - 1`)."""
        check_pair_function(fn)
        label = name or uid or "window-join"
        tagged_left = self._left.map(Tag(0), name=f"{label}[left]")
        tagged_right = self._right.map(Tag(1), name=f"{label}[right]")
        keyed = tagged_left.union(tagged_right).key_by(SideKey(*self._keys))
        return keyed.window(self._assigner).process(PairsOfWindow(fn), uid=uid, name=name)


class IntervalJoinBuilder:
    """`a.key_by(ka).interval_join(b.key_by(kb))`: say the bounds with `between`."""

    def __init__(self, left: KeyedStream, right: KeyedStream) -> None:
        self._left, self._right = left, right

    def between(self, lower_ms: int, upper_ms: int) -> IntervalJoined:
        """Pairs a left row at `lt` with a right row at `rt` when `lt + lower_ms <= rt <= lt + upper_ms`."""
        check_bounds(lower_ms, upper_ms)
        return IntervalJoined(self._left, self._right, lower_ms, upper_ms)


class IntervalJoined:
    def __init__(self, left: KeyedStream, right: KeyedStream, lower_ms: int, upper_ms: int) -> None:
        self._left, self._right = left, right
        self._bounds = (lower_ms, upper_ms)

    def process(
        self, fn: JoinFn | ProcessJoinFunction, uid: str | None = None, name: str | None = None
    ) -> DataStream:
        """`fn(left, right)` (or a ProcessJoinFunction's `process_element(left, right, ctx)`) for each
        pair; the results carry the later of the two timestamps."""
        left, right = self._left, self._right
        keys = (left.key_selector, right.key_selector)
        node = add_interval_join(
            left._graph, (left._inputs, right._inputs), keys, self._bounds, fn, uid, name
        )
        return left._of(node)
