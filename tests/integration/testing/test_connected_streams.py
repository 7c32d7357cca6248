"""Connected streams, broadcast state and joins as whole jobs (`sluice.testing`), against plain Python.

The dimension and rules inputs are bounded and finish first: the jobs then run on with one input
(FLIP-147's partially finished operator) and restart from checkpoints taken after that input ended.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import sluice
from sluice.checkpoint.state_key import load_state_key
from sluice.checkpoint.storage import read_metadata
from sluice.connectors import GeneratorSource, SequenceSource
from sluice.state.descriptors import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from sluice.testing import CollectingSink, FailingSource, run_job, start_job
from sluice.windows import EventTimeSessionWindows, SlidingEventTimeWindows, TumblingEventTimeWindows

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
    sink = CollectingSink()  # one sink for both runs, see the broadcast rescale test
    events = GeneratorSource(_event, count=None, rate=1_500)
    with start_job(_enrichment(events, sink), *OPTIONS, "--savepoint-dir", str(tmp_path)) as job:
        job.wait_checkpoints(4)
        savepoint = job.stop(drain=False)
    metadata = read_metadata(savepoint, load_state_key())
    entries = {op.uid: op for op in metadata.operators}
    assert entries["dimension"].fully_finished
    assert entries["dimension-rows"].fully_finished
    assert not entries["enrich"].fully_finished and not entries["events"].fully_finished
    # The enrichment operator runs on with its first input; its second (the dimension) has ended.
    assert entries["enrich"].finished_inputs == (1,)
    # Resumed: the events go on from where they stopped, the dimension is not read again (its records'
    # markers stay once each), and the names it gave before the stop enrich the events after it.
    bounded = GeneratorSource(_event, count=N * 3, rate=3_000)
    outcome = run_job(_enrichment(bounded, sink), *OPTIONS, "--from-savepoint", savepoint)
    assert (outcome.state, outcome.error) == ("FINISHED", None)
    expected: Counter[Any] = Counter((i, f"name-{i % KEYS}") for i in range(N * 3))
    expected.update(("dimension", k) for k in range(KEYS))
    assert Counter(sink.records()) == expected


# -- the broadcast state pattern ---------------------------------------------------------------------


def _rule(k: int) -> tuple[int, int]:
    return (k, k * 10)


class ApplyRules(sluice.KeyedBroadcastProcessFunction):
    """Holds each event until the watermark passes it; the watermark is the minimum of both inputs, so
    that is after every rule arrived (the rules input ends, its watermark becomes the maximum)."""

    def open(self, ctx: sluice.RuntimeContext) -> None:
        self.held = ctx.get_map_state(MapStateDescriptor("held"))

    def process_element(self, value: Any, ctx: Any) -> Any:
        self.held.put(ctx.timestamp, value)
        ctx.timer_service.register_event_time_timer(ctx.timestamp)

    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        ctx.broadcast_state("rules")[value[0]] = value[1]

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        event = self.held.get(timestamp)
        self.held.remove(timestamp)
        return [(event[1], ctx.broadcast_state("rules")[ctx.key])]


def _rules_job(events: sluice.connectors.Source, sink: CollectingSink):  # type: ignore[no-untyped-def,type-arg]
    def build(env: sluice.StreamEnvironment) -> None:
        rules = env.from_source(SequenceSource(0, KEYS), uid="rules").map(_rule, uid="rule-rows")
        (
            env.from_source(events, uid="events")
            .assign_timestamps(lambda e: e[1], uid="stamps")
            .key_by(lambda e: e[0])
            .connect(rules.broadcast())
            .process(ApplyRules(), uid="apply-rules")
            .sink_to(sink, uid="sink")
        )

    return build


@pytest.mark.parametrize("backend", ["heap", "disk"])
def test_broadcast_rules_reach_every_event_across_a_failure(backend: str) -> None:
    sink = CollectingSink()
    events = FailingSource(GeneratorSource(_event, count=N, rate=2_000), fail_on=lambda e: e[1] == N // 2)
    outcome = run_job(_rules_job(events, sink), *OPTIONS, "--state-backend", backend)
    assert (outcome.state, outcome.error) == ("FINISHED", None)
    assert events.failures_left() == 0
    assert sorted(sink.records()) == [(i, (i % KEYS) * 10) for i in range(N)]


def test_broadcast_state_is_restored_to_every_subtask_at_a_higher_parallelism(tmp_path: Any) -> None:
    # One sink for both runs: the resumed job commits the savepoint's transaction again, and a sink's
    # commit of a transaction it already committed is a no-op.
    sink = CollectingSink()
    events = GeneratorSource(_event, count=None, rate=1_500)
    with start_job(_rules_job(events, sink), *OPTIONS, "--savepoint-dir", str(tmp_path)) as job:
        job.wait_checkpoints(3)
        savepoint = job.stop(drain=False)
    entries = {op.uid: op for op in read_metadata(savepoint, load_state_key()).operators}
    assert entries["rules"].fully_finished and not entries["apply-rules"].fully_finished
    assert entries["apply-rules"].finished_inputs == (1,)
    # Resumed at parallelism 3: the rules input is finished and not read again, so the third subtask
    # has rules only if the restore gave it the broadcast state; every key's events need them.
    resumed = GeneratorSource(_event, count=N * 2, rate=4_000)
    outcome = run_job(
        _rules_job(resumed, sink), *OPTIONS, "--parallelism", "3", "--from-savepoint", savepoint
    )
    assert (outcome.state, outcome.error) == ("FINISHED", None)
    assert sorted(sink.records()) == [(i, (i % KEYS) * 10) for i in range(N * 2)]


# -- joins ---------------------------------------------------------------------------------------------


def _left(i: int) -> tuple[int, int]:
    return (i % KEYS, i * 2)


def _right(i: int) -> tuple[int, int]:
    return (i % KEYS, i * 3 + 1)


def _two_sides(env: sluice.StreamEnvironment, left: Any, right: Any) -> tuple[Any, Any]:
    a = env.from_source(left, uid="left").assign_timestamps(lambda e: e[1], uid="left-stamps")
    b = env.from_source(right, uid="right").assign_timestamps(lambda e: e[1], uid="right-stamps")
    return a, b


@pytest.mark.parametrize("backend", ["heap", "disk"])
def test_an_interval_join_finds_every_pair_once_across_a_failure(backend: str) -> None:
    lower, upper = -7, 4
    sink = CollectingSink()
    left = FailingSource(GeneratorSource(_left, count=N, rate=2_000), fail_on=lambda e: e[1] == N)
    right = GeneratorSource(_right, count=N, rate=2_000)

    def build(env: sluice.StreamEnvironment) -> None:
        a, b = _two_sides(env, left, right)
        a.key_by(lambda e: e[0]).interval_join(b.key_by(lambda e: e[0])).between(lower, upper).process(
            lambda x, y: (x[1], y[1]),
            uid="join",
        ).sink_to(sink, uid="sink")

    outcome = run_job(build, *OPTIONS, "--state-backend", backend)
    assert (outcome.state, outcome.error) == ("FINISHED", None)
    assert left.failures_left() == 0
    lefts, rights = [_left(i) for i in range(N)], [_right(i) for i in range(N)]
    expected = [
        (lt, rt) for lk, lt in lefts for rk, rt in rights if lk == rk and lt + lower <= rt <= lt + upper
    ]
    assert expected and sorted(sink.records()) == sorted(expected)


def _windows_of(assigner: Any, ts: int) -> list[tuple[int, int]]:
    if isinstance(assigner, TumblingEventTimeWindows):
        start = ts - ts % assigner.size_ms
        return [(start, start + assigner.size_ms)]
    size, slide = assigner.size_ms, assigner.slide_ms
    last = ts - ts % slide
    return [(s, s + size) for s in range(last, ts - size, -slide)]


def _burst(i: int, offset: int) -> tuple[int, int]:
    """Records in bursts: 10 close together per key, then a long pause; a burst is one session."""
    return (i % KEYS, (i // (KEYS * 10)) * 1_000 + (i % (KEYS * 10)) + offset)


@pytest.mark.parametrize(
    "assigner",
    [
        TumblingEventTimeWindows.of_millis(50),
        SlidingEventTimeWindows.of_millis(60, 20),
        EventTimeSessionWindows.with_gap_millis(100),
    ],
    ids=["tumbling", "sliding", "session"],
)
def test_a_window_join_pairs_each_key_and_window_once_across_a_failure(assigner: Any) -> None:
    session = isinstance(assigner, EventTimeSessionWindows)
    make_left = (lambda i: _burst(i, 0)) if session else _left
    make_right = (lambda i: _burst(i, 3)) if session else _right
    sink = CollectingSink()
    left = FailingSource(
        GeneratorSource(make_left, count=N, rate=2_000), fail_on=lambda e: e == make_left(N // 2)
    )
    right = GeneratorSource(make_right, count=N, rate=2_000)

    def build(env: sluice.StreamEnvironment) -> None:
        a, b = _two_sides(env, left, right)
        a.join(b).where(lambda e: e[0]).equal_to(lambda e: e[0]).window(assigner).apply(
            lambda x, y: (x[1], y[1]),
            uid="join",
        ).sink_to(sink, uid="sink")

    outcome = run_job(build, *OPTIONS)
    assert (outcome.state, outcome.error) == ("FINISHED", None)
    assert left.failures_left() == 0
    lefts, rights = [make_left(i) for i in range(N)], [make_right(i) for i in range(N)]
    expected: Counter[Any] = Counter()
    for lk, lt in lefts:
        for rk, rt in rights:
            if lk != rk:
                continue
            if session:
                shared = 1 if lt // 1_000 == rt // 1_000 else 0
            else:
                shared = len(set(_windows_of(assigner, lt)) & set(_windows_of(assigner, rt)))
            if shared:
                expected[(lt, rt)] += shared
    assert expected and Counter(sink.records()) == expected


def _interval_pairs(lefts: list[Any], rights: list[Any], lower: int, upper: int) -> Counter[Any]:
    return Counter(
        (lt, rt) for lk, lt in lefts for rk, rt in rights if lk == rk and lt + lower <= rt <= lt + upper
    )


@pytest.mark.parametrize("join", ["interval", "window"])
def test_a_join_suspended_and_resumed_at_a_higher_parallelism_loses_and_repeats_nothing(
    join: str, tmp_path: Any
) -> None:
    sink = CollectingSink()  # one sink for both runs, see the broadcast rescale test
    assigner = SlidingEventTimeWindows.of_millis(60, 20)

    def pipeline(count: int | None, rate: float):  # type: ignore[no-untyped-def]
        def build(env: sluice.StreamEnvironment) -> None:
            a, b = _two_sides(
                env,
                GeneratorSource(_left, count=count, rate=rate),
                GeneratorSource(_right, count=count, rate=rate),
            )
            if join == "interval":
                joined = (
                    a.key_by(lambda e: e[0])
                    .interval_join(b.key_by(lambda e: e[0]))
                    .between(-7, 4)
                    .process(lambda x, y: (x[1], y[1]), uid="join")
                )
            else:
                joined = (
                    a.join(b)
                    .where(lambda e: e[0])
                    .equal_to(lambda e: e[0])
                    .window(assigner)
                    .apply(lambda x, y: (x[1], y[1]), uid="join")
                )
            joined.sink_to(sink, uid="sink")

        return build

    with start_job(pipeline(None, 1_500), *OPTIONS, "--savepoint-dir", str(tmp_path)) as job:
        job.wait_checkpoints(3)
        savepoint = job.stop(drain=False)
    outcome = run_job(pipeline(N, 4_000), *OPTIONS, "--parallelism", "3", "--from-savepoint", savepoint)
    assert (outcome.state, outcome.error) == ("FINISHED", None)
    lefts, rights = [_left(i) for i in range(N)], [_right(i) for i in range(N)]
    if join == "interval":
        expected = _interval_pairs(lefts, rights, -7, 4)
    else:
        expected = Counter()
        for lk, lt in lefts:
            for rk, rt in rights:
                if lk == rk:
                    for _ in set(_windows_of(assigner, lt)) & set(_windows_of(assigner, rt)):
                        expected[(lt, rt)] += 1
    assert expected and Counter(sink.records()) == expected


class Checked(sluice.KeyedCoProcessFunction):
    def process_element1(self, value: Any, ctx: sluice.KeyedContext) -> Any:
        if value[1] % 5 == 0:
            raise ValueError(f"event {value[1]} is bad")
        if value[1] % 7 == 0:
            ctx.output(SEVENS, value[1])
        return [value[1]]

    def process_element2(self, value: Any, ctx: sluice.KeyedContext) -> Any:
        return None


SEVENS = sluice.OutputTag("sevens")
BAD = sluice.OutputTag("bad")


def test_dead_letters_and_side_outputs_of_a_keyed_co_process_are_exactly_once_across_a_failure() -> None:
    main, dead, sevens = CollectingSink(), CollectingSink(), CollectingSink()
    events = FailingSource(GeneratorSource(_event, count=N, rate=2_000), fail_on=lambda e: e[1] == N // 2)

    def build(env: sluice.StreamEnvironment) -> None:
        table = env.from_source(SequenceSource(0, KEYS), uid="table").map(lambda k: (k, k), uid="rows")
        out = (
            env.from_source(events, uid="events")
            .connect(table)
            .key_by(lambda e: e[0], lambda r: r[0])
            .process(Checked(), uid="checked", on_error=BAD)
        )
        out.sink_to(main, uid="main")
        out.get_side_output(BAD).map(lambda f: (f.value[1], f.error), uid="why").sink_to(dead, uid="dead")
        out.get_side_output(SEVENS).sink_to(sevens, uid="sevens")

    outcome = run_job(build, *OPTIONS)
    assert (outcome.state, outcome.error) == ("FINISHED", None)
    assert events.failures_left() == 0
    assert sorted(main.records()) == [i for i in range(N) if i % 5]
    assert sorted(dead.records()) == [(i, f"ValueError: event {i} is bad") for i in range(N) if i % 5 == 0]
    assert sorted(sevens.records()) == [i for i in range(N) if i % 7 == 0 and i % 5]
