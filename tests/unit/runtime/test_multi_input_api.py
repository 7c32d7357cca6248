"""connect, broadcast and joins in the pipeline API: the graph they build and the errors they give, each
naming the line of the pipeline that made the mistake."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

import sluice
from sluice.connectors import GeneratorSource
from sluice.graph.jobgraph import build_job_graph
from sluice.graph.transformations import PartitionKind
from sluice.testing import CollectingSink
from sluice.windows import TumblingEventTimeWindows


class Co(sluice.CoProcessFunction):
    def process_element1(self, value: Any, timestamp: int | None) -> Any:
        return [value]

    def process_element2(self, value: Any, timestamp: int | None) -> Any:
        return [value]


class KeyedCo(sluice.KeyedCoProcessFunction):
    def process_element1(self, value: Any, ctx: sluice.KeyedContext) -> Any:
        return [value]

    def process_element2(self, value: Any, ctx: sluice.KeyedContext) -> Any:
        return [value]


class Broadcasting(sluice.KeyedBroadcastProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        return [value]

    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        return None


def streams() -> tuple[sluice.StreamEnvironment, sluice.DataStream, sluice.DataStream]:
    env = sluice.StreamEnvironment(parallelism=2)
    a = env.from_source(GeneratorSource(lambda i: i, count=10), uid="a")
    b = env.from_source(GeneratorSource(lambda i: i, count=10), uid="b")
    return env, a, b


def here() -> str:
    """file:line two lines below the caller's: where the call under test is (after a `with`)."""
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return f"test_multi_input_api.py:{frame.f_back.f_lineno + 2}"


def test_a_keyed_connect_is_one_vertex_with_both_inputs_hashed_by_their_own_key() -> None:
    env, a, b = streams()
    a.connect(b).key_by(lambda x: x % 3, lambda y: y % 3).process(KeyedCo(), uid="co").sink_to(
        CollectingSink(), uid="sink"
    )
    graph = build_job_graph("j", env.nodes, env.parallelism, env.max_parallelism)
    [co] = [v for v in graph.vertices if "co" in v.uids]
    assert [(e.side, e.partitioning.kind) for e in co.inputs] == [
        (0, PartitionKind.HASH),
        (1, PartitionKind.HASH),
    ]
    assert co.uids == ["co", "sink"], "what follows a two-input operator chains to it"


def test_a_union_on_one_side_feeds_that_side_with_every_stream_of_it() -> None:
    env, a, b = streams()
    c = env.from_source(GeneratorSource(lambda i: i, count=10), uid="c")
    a.union(c).connect(b).process(Co(), uid="co").sink_to(CollectingSink(), uid="sink")
    graph = build_job_graph("j", env.nodes, env.parallelism, env.max_parallelism)
    [co] = [v for v in graph.vertices if "co" in v.uids]
    sources = {graph.vertex(e.source).uids[0]: e.side for e in co.inputs}
    assert sources == {"a": 0, "c": 0, "b": 1}


def test_broadcast_state_pattern_hashes_the_keyed_side_and_broadcasts_the_other() -> None:
    env, a, b = streams()
    a.key_by(lambda x: x).connect(b.broadcast()).process(Broadcasting(), uid="rules").sink_to(
        CollectingSink(), uid="sink"
    )
    graph = build_job_graph("j", env.nodes, env.parallelism, env.max_parallelism)
    [op] = [v for v in graph.vertices if "rules" in v.uids]
    assert [(e.side, e.partitioning.kind) for e in op.inputs] == [
        (0, PartitionKind.HASH),
        (1, PartitionKind.BROADCAST),
    ]


def test_a_keyed_co_process_function_without_key_selectors_is_refused_naming_the_line() -> None:
    _, a, b = streams()
    where = here()
    with pytest.raises(ValueError, match=f"at {where}: a KeyedCoProcessFunction needs both inputs keyed"):
        a.connect(b).process(KeyedCo(), uid="co")


def test_connected_streams_key_by_needs_two_selectors() -> None:
    _, a, b = streams()
    where = here()
    with pytest.raises(TypeError, match=f"key_by at {where}: connected streams need two key selectors"):
        a.connect(b).key_by(lambda x: x, None)  # type: ignore[arg-type]


def test_a_broadcast_function_with_a_stream_that_is_not_broadcast_is_refused_naming_the_line() -> None:
    _, a, b = streams()
    where = here()
    with pytest.raises(ValueError, match=f"at {where}: a KeyedBroadcastProcessFunction needs a broadcast"):
        a.key_by(lambda x: x).connect(b).process(Broadcasting(), uid="rules")


def test_a_broadcast_function_needs_its_first_input_keyed() -> None:
    _, a, b = streams()
    where = here()
    with pytest.raises(ValueError, match=f"at {where}: .*needs the first input keyed"):
        a.connect(b.broadcast()).process(Broadcasting(), uid="rules")


def test_a_co_process_function_on_a_keyed_and_a_broadcast_stream_is_refused() -> None:
    _, a, b = streams()
    with pytest.raises(TypeError, match=r"needs a sluice\.KeyedBroadcastProcessFunction"):
        a.key_by(lambda x: x).connect(b.broadcast()).process(Co(), uid="rules")


def test_between_with_lower_above_upper_is_refused_naming_the_line() -> None:
    _, a, b = streams()
    joined = a.key_by(lambda x: x).interval_join(b.key_by(lambda y: y))
    where = here()
    with pytest.raises(ValueError, match=f"between at {where}: lower bound 5 ms is above the upper"):
        joined.between(5, -5)


def test_an_interval_join_needs_a_keyed_right_side() -> None:
    _, a, b = streams()
    where = here()
    with pytest.raises(TypeError, match=f"interval_join at {where} needs a keyed stream on the right"):
        a.key_by(lambda x: x).interval_join(b)  # type: ignore[arg-type]


def test_an_interval_join_needs_whole_milliseconds() -> None:
    _, a, b = streams()
    with pytest.raises(TypeError, match="whole milliseconds"):
        a.key_by(lambda x: x).interval_join(b.key_by(lambda y: y)).between(0.5, 3)  # type: ignore[arg-type]


def test_a_window_join_needs_both_keys_and_an_assigner() -> None:
    _, a, b = streams()
    where = here()
    with pytest.raises(TypeError, match=f"where at {where} needs a key selector"):
        a.join(b).where(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="give the left key first"):
        a.join(b).equal_to(lambda y: y)
    with pytest.raises(TypeError, match="needs a window assigner"):
        a.join(b).where(lambda x: x).equal_to(lambda y: y).window(1000)  # type: ignore[arg-type]


def test_a_window_join_is_a_keyed_window_over_both_sides() -> None:
    env, a, b = streams()
    a.join(b).where(lambda x: x).equal_to(lambda y: y).window(TumblingEventTimeWindows.of_millis(10)).apply(
        lambda left, right: (left, right), uid="join"
    ).sink_to(CollectingSink(), uid="sink")
    graph = build_job_graph("j", env.nodes, env.parallelism, env.max_parallelism)
    [join] = [v for v in graph.vertices if "join" in v.uids]
    assert len(join.inputs) == 2 and all(e.partitioning.kind is PartitionKind.HASH for e in join.inputs)


def test_a_stateful_two_input_operator_needs_a_uid() -> None:
    env, a, b = streams()
    a.connect(b).process(Co()).sink_to(CollectingSink(), uid="sink")
    with pytest.raises(ValueError, match="needs a uid"):
        build_job_graph("j", env.nodes, env.parallelism, env.max_parallelism)
