"""Pipelines built through the public API become job graphs: chaining, edge patterns and build errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import sluice
from sluice._pipeline import build_graph
from sluice.connectors import PrintSink, SequenceSource
from sluice.graph.jobgraph import ALL_TO_ALL, POINTWISE, GraphError, JobGraph, build_job_graph
from sluice.graph.transformations import PartitionKind

W1 = Path(__file__).resolve().parents[3] / "examples" / "w1_window_counts.py"


def job(env: sluice.StreamEnvironment) -> JobGraph:
    return build_job_graph("test", env.nodes, env.parallelism, env.max_parallelism)


def line_of_next_statement() -> int:
    return sys._getframe(1).f_lineno + 1


def test_w1_chains_into_two_vertices(tmp_path: Path) -> None:
    env = sluice.StreamEnvironment(args={"out": str(tmp_path / "out")}, parallelism=2)
    graph = build_graph(str(W1), env)
    assert [v.uids for v in graph.vertices] == [["numbers", "parse", "ts", "ones"], ["count", "sink"]]
    assert [v.parallelism for v in graph.vertices] == [2, 2]
    (edge,) = graph.vertex(1).inputs
    assert (edge.source, edge.target) == (0, 1)
    assert edge.partitioning.kind is PartitionKind.HASH and edge.pattern == ALL_TO_ALL
    assert graph.vertex(0).outputs == [edge]
    assert graph.vertex(0).is_source and not graph.vertex(1).is_source


def test_forward_with_equal_parallelism_chains() -> None:
    env = sluice.StreamEnvironment(parallelism=3)
    env.from_source(SequenceSource(0, 10), uid="src").map(str).filter(bool).sink_to(PrintSink(), uid="out")
    graph = job(env)
    assert len(graph.vertices) == 1
    assert graph.vertices[0].uids[0] == "src" and graph.vertices[0].uids[-1] == "out"
    assert graph.vertices[0].parallelism == 3


def test_explicit_forward_with_different_parallelism_is_an_error() -> None:
    env = sluice.StreamEnvironment(parallelism=2)
    source = env.from_source(SequenceSource(0, 10), uid="src")
    line = line_of_next_statement()
    source.forward().map(str, uid="wide").set_parallelism(4).sink_to(PrintSink(), uid="out")
    with pytest.raises(GraphError) as caught:
        job(env)
    message = str(caught.value)
    assert f"map operator 'wide' at {Path(__file__).name}:{line}" in message
    assert "(2 vs 4)" in message and "use rebalance() instead" in message


def test_different_parallelism_without_partitioning_rebalances() -> None:
    env = sluice.StreamEnvironment(parallelism=2)
    env.from_source(SequenceSource(0, 10), uid="src").map(str, uid="wide").set_parallelism(4).sink_to(
        PrintSink(), uid="out"
    )
    graph = job(env)
    # src (2) -> wide (4) -> out (2, the default): both steps change the parallelism.
    assert [v.uids for v in graph.vertices] == [["src"], ["wide"], ["out"]]
    assert [v.parallelism for v in graph.vertices] == [2, 4, 2]
    for vertex in graph.vertices[1:]:
        (edge,) = vertex.inputs
        assert edge.partitioning.kind is PartitionKind.REBALANCE and edge.pattern == ALL_TO_ALL


def test_rebalance_and_broadcast_break_the_chain_even_at_equal_parallelism() -> None:
    env = sluice.StreamEnvironment(parallelism=2)
    source = env.from_source(SequenceSource(0, 10), uid="src")
    source.rebalance().map(str, uid="a").broadcast().sink_to(PrintSink(), uid="out")
    graph = job(env)
    assert [v.uids for v in graph.vertices] == [["src"], ["a"], ["out"]]
    kinds = [v.inputs[0].partitioning.kind for v in graph.vertices[1:]]
    assert kinds == [PartitionKind.REBALANCE, PartitionKind.BROADCAST]
    assert all(v.inputs[0].pattern == ALL_TO_ALL for v in graph.vertices[1:])


def test_operator_feeding_two_consumers_does_not_chain() -> None:
    env = sluice.StreamEnvironment(parallelism=2)
    source = env.from_source(SequenceSource(0, 10), uid="src")
    source.map(str, uid="left").sink_to(PrintSink(), uid="left-out")
    source.map(repr, uid="right").sink_to(PrintSink(), uid="right-out")
    graph = job(env)
    assert [v.uids for v in graph.vertices] == [["src"], ["left", "left-out"], ["right", "right-out"]]
    assert all(v.inputs[0].pattern == POINTWISE for v in graph.vertices[1:])
    assert len(graph.vertex(0).outputs) == 2


def test_union_makes_a_multi_input_vertex() -> None:
    env = sluice.StreamEnvironment(parallelism=2)
    first = env.from_source(SequenceSource(0, 10), uid="first")
    second = env.from_source(SequenceSource(10, 20), uid="second").map(lambda i: -i, uid="neg")
    first.union(second).map(str, uid="merged").sink_to(PrintSink(), uid="out")
    graph = job(env)
    assert [v.uids for v in graph.vertices] == [["first"], ["second", "neg"], ["merged", "out"]]
    inputs = graph.vertex(2).inputs
    assert [(e.source, e.input_index) for e in inputs] == [(0, 0), (1, 1)]
    assert all(e.pattern == POINTWISE for e in inputs)


def test_union_of_keyed_streams_hashes_every_input() -> None:
    env = sluice.StreamEnvironment(parallelism=2)
    first = env.from_source(SequenceSource(0, 10), uid="first")
    second = env.from_source(SequenceSource(10, 20), uid="second")
    first.union(second).key_by(lambda i: i % 3).reduce(max, uid="max").sink_to(PrintSink(), uid="out")
    graph = job(env)
    assert [e.partitioning.kind for e in graph.vertex(2).inputs] == [PartitionKind.HASH] * 2


def test_stateful_operator_without_uid_is_an_error_naming_it_and_its_line() -> None:
    env = sluice.StreamEnvironment()
    keyed = env.from_source(SequenceSource(0, 10), uid="src").key_by(lambda i: i % 2)
    line = line_of_next_statement()
    keyed.reduce(lambda a, b: a + b).sink_to(PrintSink(), uid="out")
    with pytest.raises(GraphError) as caught:
        job(env)
    message = str(caught.value)
    assert f"reduce operator 'reduce' at {Path(__file__).name}:{line} holds state and needs a uid" in message


def test_sink_without_uid_is_an_error() -> None:
    env = sluice.StreamEnvironment()
    env.from_source(SequenceSource(0, 10), uid="src").sink_to(PrintSink())
    with pytest.raises(GraphError, match=r"sink operator 'sink' .* needs a uid"):
        job(env)


def test_stateless_operators_get_generated_uids() -> None:
    env = sluice.StreamEnvironment()
    env.from_source(SequenceSource(0, 10), uid="src").map(str).filter(bool).sink_to(PrintSink(), uid="out")
    (vertex,) = job(env).vertices
    assert len(set(vertex.uids)) == 4
    assert vertex.uids[1].startswith("map") and vertex.uids[2].startswith("filter")


def test_duplicate_uid_is_an_error_naming_both_operators() -> None:
    env = sluice.StreamEnvironment()
    source = env.from_source(SequenceSource(0, 10), uid="src")
    first_line = line_of_next_statement()
    mapped = source.map(str, uid="step")
    second_line = line_of_next_statement()
    mapped.map(len, uid="step").sink_to(PrintSink(), uid="out")
    with pytest.raises(GraphError) as caught:
        job(env)
    message = str(caught.value)
    here = Path(__file__).name
    assert "duplicate uid 'step'" in message
    assert f"map operator 'step' at {here}:{first_line}" in message
    assert f"map operator 'step' at {here}:{second_line}" in message


@pytest.mark.parametrize("uid", ["", "a/b"])
def test_bad_uid_is_an_error(uid: str) -> None:
    env = sluice.StreamEnvironment()
    env.from_source(SequenceSource(0, 10), uid="src").map(str, uid=uid).sink_to(PrintSink(), uid="out")
    with pytest.raises(GraphError, match="must be a non-empty name without '/'"):
        job(env)


def test_output_going_nowhere_is_an_error() -> None:
    env = sluice.StreamEnvironment()
    env.from_source(SequenceSource(0, 10), uid="src").map(str, uid="dangling")
    with pytest.raises(GraphError, match=r"'dangling'.*goes nowhere; end the pipeline with sink_to"):
        job(env)


def test_empty_pipeline_is_an_error() -> None:
    with pytest.raises(GraphError, match="the pipeline is empty"):
        job(sluice.StreamEnvironment())


def test_parallelism_above_max_parallelism_is_an_error() -> None:
    env = sluice.StreamEnvironment(parallelism=2, max_parallelism=4)
    env.from_source(SequenceSource(0, 10), uid="src").map(str, uid="wide").set_parallelism(8).sink_to(
        PrintSink(), uid="out"
    )
    with pytest.raises(GraphError, match=r"'wide'.*parallelism 8 exceeds the max parallelism 4"):
        job(env)
