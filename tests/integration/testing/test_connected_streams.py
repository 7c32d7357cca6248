"""Connected streams, broadcast state and joins as whole jobs (`sluice.testing`), against plain Python.

The dimension and rules inputs are bounded and finish first: the jobs then run on with one input
(FLIP-147's partially finished operator) and restart from checkpoints taken after that input ended.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import sluice
from sluice.checkpoint.state_key import load_state_key
from sluice.checkpoint.storage import read_metadata
from sluice.connectors import GeneratorSource, SequenceSource
from sluice.state.descriptors import ListStateDescriptor, ValueStateDescriptor
from sluice.testing import CollectingSink, FailingSource, run_job, start_job

N = 1_200
KEYS = 12
OPTIONS = ("--checkpoint-interval", "40ms", "--restart-delay", "0s", "--parallelism", "2")


def _event(i: int) -> tuple[int, int]:
    return (i % KEYS, i)


class Enrich(sluice.KeyedCoProcessFunction):
    """Input 1: events (key, n); input 2: the dimension (key, name). An event waits for its key's name."""

    def open(self, ctx: sluice.RuntimeContext) -> None:
        self.name = ctx.get_state(ValueStateDescriptor("name"))
        self.waiting = ctx.get_list_state(ListStateDescriptor("waiting"))

    def process_element1(self, value: Any, ctx: sluice.KeyedContext) -> Any:
        name = self.name.value()
        if name is None:
            self.waiting.add(value)
            return None
        return [(value[1], name)]

    def process_element2(self, value: Any, ctx: sluice.KeyedContext) -> Any:
        self.name.update(value[1])
        held = self.waiting.get()
        self.waiting.clear()
        # The marker shows how often the dimension record was processed: once, even across restarts.
        return [("dimension", value[0]), *((e[1], value[1]) for e in held)]


def _enrichment(events: sluice.connectors.Source, sink: CollectingSink):  # type: ignore[no-untyped-def,type-arg]
    def build(env: sluice.StreamEnvironment) -> None:
        dimension = env.from_source(SequenceSource(0, KEYS), uid="dimension").map(
            lambda k: (k, f"name-{k}"), uid="dimension-rows"
        )
        stream = env.from_source(events, uid="events")
        (
            stream.connect(dimension)
            .key_by(lambda e: e[0], lambda d: d[0])
            .process(Enrich(), uid="enrich")
            .sink_to(sink, uid="sink")
        )

    return build


def _enrichment_reference() -> Counter[Any]:
    expected: Counter[Any] = Counter((i, f"name-{i % KEYS}") for i in range(N))
    expected.update(("dimension", k) for k in range(KEYS))
    return expected


def test_a_keyed_co_process_joins_events_with_a_dimension_that_finished_first_across_a_failure() -> None:
    sink = CollectingSink()
    events = FailingSource(GeneratorSource(_event, count=N, rate=2_000), fail_on=lambda e: e[1] == N * 3 // 4)
    outcome = run_job(_enrichment(events, sink), *OPTIONS)
    assert (outcome.state, outcome.error) == ("FINISHED", None)
    assert events.failures_left() == 0
    # Every event once with its name, and every dimension record processed once: the restart restored
    # what the finished dimension input had given and did not read that input again.
    assert Counter(sink.records()) == _enrichment_reference()


def test_a_checkpoint_after_the_dimension_ended_records_it_finished_and_a_resume_does_not_replay_it(
    tmp_path: Any,
) -> None:
    first = CollectingSink()
    events = GeneratorSource(_event, count=None, rate=1_500)
    with start_job(_enrichment(events, first), *OPTIONS, "--savepoint-dir", str(tmp_path)) as job:
        job.wait_checkpoints(4)
        savepoint = job.stop(drain=False)
    metadata = read_metadata(savepoint, load_state_key())
    entries = {op.uid: op for op in metadata.operators}
    assert entries["dimension"].fully_finished
    assert entries["dimension-rows"].fully_finished
    assert not entries["enrich"].fully_finished and not entries["events"].fully_finished
    # Resumed: the events go on from where they stopped, the dimension is not read again, and the
    # names it gave before the stop still enrich the events after it.
    second = CollectingSink()
    bounded = GeneratorSource(_event, count=N * 3, rate=3_000)
    outcome = run_job(_enrichment(bounded, second), *OPTIONS, "--from-savepoint", savepoint)
    assert outcome.state == "FINISHED"
    markers = [r for r in first.records() + second.records() if r[0] == "dimension"]
    assert sorted(markers) == [("dimension", k) for k in range(KEYS)]
    enriched = [r for r in second.records() if r[0] != "dimension"]
    assert enriched, "the resumed job enriched nothing"
    assert all(name == f"name-{n % KEYS}" for n, name in enriched)
