"""The two-input operators stopped with a savepoint, resumed, and stopped with drain (`sluice.testing`).

Each job runs unbounded: stopped without drain (SUSPEND), resumed from that savepoint (the keyed
co-process at a higher parallelism), then stopped with drain (TERMINATE), which fires every window and
expires every buffered row. Each input's records also go to a sink of their own, straight from the
source: those sinks commit at the same checkpoints as the operator's, so they hold exactly the records
the runs consumed, and the reference is computed from them. A drained savepoint is terminal, as in
Flink: every operator in it is finished, so a job resumed from it ends at once and outputs nothing more.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import sluice
from sluice._states import StopMode
from sluice.checkpoint.state_key import load_state_key
from sluice.checkpoint.storage import read_metadata
from sluice.connectors import GeneratorSource, SequenceSource
from sluice.state.descriptors import ListStateDescriptor, ValueStateDescriptor
from sluice.testing import CollectingSink, run_job, start_job
from sluice.windows import SlidingEventTimeWindows

KEYS = 12
OPTIONS = ("--checkpoint-interval", "40ms", "--restart-delay", "0s", "--parallelism", "2")
LOWER, UPPER = -7, 4
SLIDING = SlidingEventTimeWindows.of_millis(60, 20)

Row = tuple[int, int]


def _left(i: int) -> Row:
    return (i % KEYS, i * 2)


def _right(i: int) -> Row:
    return (i % KEYS, i * 3 + 1)


def _interval_pairs(lefts: list[Row], rights: list[Row]) -> Counter[Any]:
    return Counter(
        (lt, rt) for lk, lt in lefts for rk, rt in rights if lk == rk and lt + LOWER <= rt <= lt + UPPER
    )


def _windows(ts: int) -> set[tuple[int, int]]:
    size, slide = SLIDING.size_ms, SLIDING.slide_ms
    last = ts - ts % slide
    return {(s, s + size) for s in range(last, ts - size, -slide)}


def _window_pairs(lefts: list[Row], rights: list[Row]) -> Counter[Any]:
    pairs: Counter[Any] = Counter()
    for lk, lt in lefts:
        for rk, rt in rights:
            if lk == rk and (shared := len(_windows(lt) & _windows(rt))):
                pairs[(lt, rt)] += shared
    return pairs


class Sinks:
    """One set of sinks for both runs: the resumed job commits the savepoint's transactions again,
    which a sink that already committed them ignores."""

    def __init__(self) -> None:
        self.out, self.left, self.right = CollectingSink(), CollectingSink(), CollectingSink()


def _join_job(join: str, sinks: Sinks) -> Callable[[sluice.StreamEnvironment], None]:
    def build(env: sluice.StreamEnvironment) -> None:
        a = env.from_source(GeneratorSource(_left, rate=1_500), uid="left")
        b = env.from_source(GeneratorSource(_right, rate=1_500), uid="right")
        a = a.assign_timestamps(lambda e: e[1], uid="left-stamps")
        b = b.assign_timestamps(lambda e: e[1], uid="right-stamps")
        a.sink_to(sinks.left, uid="left-seen")
        b.sink_to(sinks.right, uid="right-seen")
        if join == "interval":
            joined = (
                a.key_by(lambda e: e[0])
                .interval_join(b.key_by(lambda e: e[0]))
                .between(LOWER, UPPER)
                .process(lambda x, y: (x[1], y[1]), uid="join")
            )
        else:
            joined = (
                a.join(b)
                .where(lambda e: e[0])
                .equal_to(lambda e: e[0])
                .window(SLIDING)
                .apply(lambda x, y: (x[1], y[1]), uid="join")
            )
        joined.sink_to(sinks.out, uid="out")

    return build


def _stop(build: Callable[[sluice.StreamEnvironment], None], drain: bool, *options: str) -> str:
    with start_job(build, *OPTIONS, *options) as job:
        job.wait_checkpoints(3)
        savepoint = job.stop(drain=drain)
        outcome = job.wait()
    assert (outcome.state, outcome.error, outcome.stop_savepoint) == ("FINISHED", None, savepoint)
    assert read_metadata(savepoint, load_state_key()).stop_mode == StopMode.of_drain(drain)
    return savepoint


def _suspend_resume_drain(
    build: Callable[[sluice.StreamEnvironment], None],
    savepoints: Any,
    *resumed_options: str,
    both: tuple[str, ...] = (),
) -> str:
    """Runs `build` to a stop without drain, resumes it and stops it with drain; the drained savepoint.
    `both`: options of both runs."""
    suspended = _stop(build, False, "--savepoint-dir", str(savepoints), *both)
    finished = read_metadata(suspended, load_state_key()).operators
    # A suspend finishes no operator: every one resumes.
    assert not any(op.fully_finished for op in finished if op.uid not in ("dimension", "dimension-rows"))
    return _stop(
        build,
        True,
        "--savepoint-dir",
        str(savepoints),
        "--from-savepoint",
        suspended,
        *both,
        *resumed_options,
    )


def _assert_terminal(
    build: Callable[[sluice.StreamEnvironment], None], drained: str, *sinks: CollectingSink
) -> None:
    """A job resumed from a drained savepoint finds every operator finished: it ends, reading and
    writing nothing (no record is repeated)."""
    entries = read_metadata(drained, load_state_key()).operators
    assert all(op.fully_finished for op in entries)
    before = [Counter(sink.records()) for sink in sinks]
    outcome = run_job(build, *OPTIONS, "--from-savepoint", drained)
    assert (outcome.state, outcome.error) == ("FINISHED", None)
    assert [Counter(sink.records()) for sink in sinks] == before


@pytest.mark.parametrize(("join", "backend"), [("interval", "heap"), ("window", "heap"), ("window", "disk")])
def test_a_join_suspended_resumed_and_drained_outputs_each_pair_once(
    join: str, backend: str, tmp_path: Any
) -> None:
    sinks = Sinks()
    build = _join_job(join, sinks)
    drained = _suspend_resume_drain(build, tmp_path, both=("--state-backend", backend))
    lefts, rights = sinks.left.records(), sinks.right.records()
    # Each source went on from where it was suspended: a gap-free prefix of its records, each once.
    assert sorted(lefts) == sorted(_left(i) for i in range(len(lefts)))
    assert sorted(rights) == sorted(_right(i) for i in range(len(rights)))
    # The drain fired every window and expired every buffered row: every pair of what was consumed.
    pairs = _interval_pairs if join == "interval" else _window_pairs
    expected = pairs(lefts, rights)
    assert expected and Counter(sinks.out.records()) == expected
    _assert_terminal(build, drained, sinks.out, sinks.left, sinks.right)


# -- keyed co-process: a dimension that finished first, stopped and resumed --------------------------


def _event(i: int) -> Row:
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
        return [(value[1], name, ctx.key)]

    def process_element2(self, value: Any, ctx: sluice.KeyedContext) -> Any:
        self.name.update(value[1])
        held = self.waiting.get()
        self.waiting.clear()
        # The marker shows how often the dimension record was processed: once, across every stop.
        return [("dimension", value[0]), *((e[1], value[1], ctx.key) for e in held)]


def _enrichment(sink: CollectingSink, seen: CollectingSink) -> Callable[[sluice.StreamEnvironment], None]:
    def build(env: sluice.StreamEnvironment) -> None:
        dimension = env.from_source(SequenceSource(0, KEYS), uid="dimension").map(
            lambda k: (k, f"name-{k}"), uid="dimension-rows"
        )
        events = env.from_source(GeneratorSource(_event, rate=1_500), uid="events")
        events.sink_to(seen, uid="events-seen")
        events.connect(dimension).key_by(lambda e: e[0], lambda d: d[0]).process(
            Enrich(), uid="enrich"
        ).sink_to(sink, uid="sink")

    return build


def _enriched(events: list[Row]) -> Counter[Any]:
    expected: Counter[Any] = Counter((i, f"name-{k}", k) for k, i in events)
    expected.update(("dimension", k) for k in range(KEYS))
    return expected


@pytest.mark.parametrize("resumed_parallelism", ["2", "3"], ids=["same", "rescaled"])
def test_a_keyed_co_process_suspended_resumed_and_drained_keeps_the_finished_dimension(
    resumed_parallelism: str, tmp_path: Any
) -> None:
    out, seen = CollectingSink(), CollectingSink()
    build = _enrichment(out, seen)
    drained = _suspend_resume_drain(build, tmp_path, "--parallelism", resumed_parallelism)
    events = seen.records()
    assert sorted(events) == sorted(_event(i) for i in range(len(events)))
    # Every event once with its name, the dimension processed once: the names the finished dimension
    # gave before the stop enrich the events after it, and that input was not read again. At 3
    # subtasks each key's name must have moved with its key group, or its events would wait unmatched.
    assert Counter(out.records()) == _enriched(events)
    _assert_terminal(build, drained, out, seen)
