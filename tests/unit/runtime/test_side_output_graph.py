"""How side outputs become edges of the job graph, and the errors of pipelines that misuse them."""

from __future__ import annotations

from typing import Any

import pytest

import sluice
from sluice.connectors import FileSink, GeneratorSource
from sluice.graph.jobgraph import build_job_graph
from sluice.graph.transformations import PartitionKind

BAD = sluice.OutputTag("bad")


class Keyed(sluice.KeyedProcessFunction):
    def process_element(self, value: Any, ctx: sluice.KeyedContext) -> None:
        ctx.output(sluice.OutputTag("any"), value)


def pipeline(parallelism: int = 2) -> tuple[sluice.StreamEnvironment, sluice.DataStream]:
    env = sluice.StreamEnvironment(parallelism=parallelism)
    return env, env.from_source(GeneratorSource(lambda i: i, count=10), uid="gen")


def test_a_read_side_output_ends_the_vertex_and_gets_its_own_tagged_edge() -> None:
    env, src = pipeline()
    parsed = src.map(int, uid="parse", on_error=BAD)
    parsed.sink_to(FileSink("/tmp/unused-main"), uid="main")
    parsed.get_side_output(BAD).sink_to(FileSink("/tmp/unused-bad"), uid="bad")
    graph = build_job_graph("j", env.nodes, env.parallelism, env.max_parallelism)
    [head] = [v for v in graph.vertices if "parse" in v.uids]
    assert head.uids[-1] == "parse", "the operator whose side output is read is the tail of its vertex"
    tags = sorted((e.tag or "") for e in head.outputs)
    assert tags == ["", "bad"]
    side = next(e for e in head.outputs if e.tag == "bad")
    target = graph.vertex(side.target)
    assert target.parallelism == head.parallelism
    assert side.partitioning.kind is PartitionKind.FORWARD
    assert target.uids[-1] == "bad", "the side output's consumers chain behind it"


def test_side_output_inherits_its_operators_parallelism() -> None:
    env, src = pipeline(parallelism=2)
    parsed = src.map(int, uid="parse", on_error=BAD).set_parallelism(3)
    parsed.sink_to(FileSink("/tmp/unused-main"), uid="main")
    parsed.get_side_output(BAD).sink_to(FileSink("/tmp/unused-bad"), uid="bad")
    graph = build_job_graph("j", env.nodes, env.parallelism, env.max_parallelism)
    [side] = [v for v in graph.vertices if v.operators[0].kind == "side_output"]
    assert side.parallelism == 3, "the side output runs beside the operator that emits it"
    sink = next(v for v in graph.vertices if "bad" in v.uids)
    assert sink.parallelism == 2, "what reads it takes the default, as any operator"


def test_only_the_side_output_read_is_enough() -> None:
    env, src = pipeline()
    parsed = src.map(int, uid="parse", on_error=BAD)
    parsed.get_side_output(BAD).sink_to(FileSink("/tmp/unused-bad"), uid="bad")
    build_job_graph("j", env.nodes, env.parallelism, env.max_parallelism)


def test_get_side_output_of_an_undeclared_tag_is_refused() -> None:
    _, src = pipeline()
    parsed = src.map(int, uid="parse")
    with pytest.raises(ValueError, match=r"has no side output 'bad' \(it declares: none\)"):
        parsed.get_side_output(BAD)
    with pytest.raises(ValueError, match="has no side output 'other'"):
        src.map(int, uid="p2", on_error=BAD).get_side_output(sluice.OutputTag("other"))


def test_get_side_output_needs_an_output_tag() -> None:
    _, src = pipeline()
    with pytest.raises(TypeError, match=r"needs a sluice\.OutputTag"):
        src.map(int, on_error=BAD).get_side_output("bad")  # type: ignore[arg-type]


def test_keyed_process_may_emit_any_tag() -> None:
    _, src = pipeline()
    out = src.key_by(lambda v: v).process(Keyed(), uid="k")
    out.get_side_output(sluice.OutputTag("whatever"))


def test_on_error_must_be_fail_skip_or_a_tag() -> None:
    _, src = pipeline()
    with pytest.raises(ValueError, match=r"on_error must be \"fail\", \"skip\" or a sluice\.OutputTag"):
        src.map(int, on_error="ignore")
