"""`ctx.output` to the operator's own on_error tag, refused when the pipeline is built wherever the
function names that tag itself (a global, a closure variable, an attribute of `self`), and at run time
otherwise (test_dead_letters.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import sluice
from sluice.connectors import GeneratorSource
from sluice.engine.operators.keyed import KeyedProcessOperator
from sluice.side_outputs import OutputTag

from ._support import start

DEAD = OutputTag("dead")
output = OutputTag("dead")  # a global named like ctx's method: `ctx.output` must not count as naming it
REFUSED = (
    r"at test_output_to_own_tag\.py:\d+: \w+\.[\w ()]+ uses OutputTag\('dead'\), "
    r"which is this operator's on_error tag"
)


def keyed(env: sluice.StreamEnvironment | None = None) -> sluice.KeyedStream:
    env = env or sluice.StreamEnvironment()
    return env.from_source(GeneratorSource(lambda i: i, count=10), uid="src").key_by(lambda v: v % 3)


class ByGlobal(sluice.KeyedProcessFunction):
    def process_element(self, value: Any, ctx: sluice.KeyedContext) -> None:
        if value < 0:
            ctx.output(DEAD, value)


class ByAttributeInTimer(sluice.KeyedProcessFunction):
    def __init__(self, tag: OutputTag) -> None:
        self.tag = tag

    def process_element(self, value: Any, ctx: sluice.KeyedContext) -> None:
        ctx.timer_service.register_event_time_timer(1)

    def on_timer(self, timestamp: int, ctx: sluice.KeyedContext) -> None:
        ctx.output(self.tag, timestamp)


class ByHelperMethod(sluice.KeyedProcessFunction):
    def process_element(self, value: Any, ctx: sluice.KeyedContext) -> None:
        self.route(value, ctx)

    def route(self, value: Any, ctx: sluice.KeyedContext) -> None:
        ctx.output(DEAD, value)


def _send_to_dead(value: Any, ctx: sluice.KeyedContext) -> None:
    ctx.output(DEAD, value)


class ByModuleHelper(sluice.KeyedProcessFunction):
    def process_element(self, value: Any, ctx: sluice.KeyedContext) -> None:
        _send_to_dead(value, ctx)


def by_closure(tag: OutputTag) -> sluice.KeyedProcessFunction:
    class ByClosure(sluice.KeyedProcessFunction):
        def process_element(self, value: Any, ctx: sluice.KeyedContext) -> None:
            ctx.output(tag, value)

    return ByClosure()


class ByNestedLambda(sluice.KeyedProcessFunction):
    def process_element(self, value: Any, ctx: sluice.KeyedContext) -> None:
        send: Callable[[Any], None] = lambda v: ctx.output(DEAD, v)  # noqa: E731
        send(value)


class ByClosureInANestedLambda(sluice.KeyedProcessFunction):
    """Uses super() (an extra closure cell, __class__) and a lambda that reads the method's closure."""

    def open(self, ctx: sluice.RuntimeContext) -> None:
        super().open(ctx)


def by_closure_in_a_lambda(tag: OutputTag) -> sluice.KeyedProcessFunction:
    class Nested(ByClosureInANestedLambda):
        def process_element(self, value: Any, ctx: sluice.KeyedContext) -> None:
            super().open  # noqa: B018 - the method's closure has __class__ as well as tag
            send: Callable[[Any], None] = lambda v: ctx.output(tag, v)  # noqa: E731
            send(value)

    return Nested()


CASES: list[tuple[str, Callable[[], sluice.KeyedProcessFunction]]] = [
    ("global", ByGlobal),
    ("attribute of self, in on_timer", lambda: ByAttributeInTimer(DEAD)),
    ("method called through self", ByHelperMethod),
    ("function of the same module", ByModuleHelper),
    ("closure variable", lambda: by_closure(DEAD)),
    ("lambda nested in the method", ByNestedLambda),
    ("closure variable read in a nested lambda", lambda: by_closure_in_a_lambda(DEAD)),
]


@pytest.mark.parametrize(("how", "make"), CASES, ids=[c[0] for c in CASES])
def test_a_keyed_process_naming_its_own_on_error_tag_is_refused_before_the_start(
    how: str, make: Callable[[], sluice.KeyedProcessFunction]
) -> None:
    with pytest.raises(ValueError, match=r"process\(mixed\) " + REFUSED):
        keyed().process(make(), uid="mixed", on_error=OutputTag("dead"))


def test_the_error_names_the_method_that_uses_the_tag() -> None:
    with pytest.raises(ValueError, match=r"ByHelperMethod\.route \(called from process_element\) uses"):
        keyed().process(ByHelperMethod(), uid="mixed", on_error=DEAD)


class OtherTags(sluice.KeyedProcessFunction):
    """Keeps the dead-letter tag (for another stage), sends to another tag, and calls `ctx.output`
    while a global named `output` is the dead-letter tag: none of it is output to its own tag."""

    def __init__(self) -> None:
        self.dead = DEAD
        self.late = OutputTag("late")

    def process_element(self, value: Any, ctx: sluice.KeyedContext) -> None:
        ctx.output(self.late, value)


@pytest.mark.parametrize("on_error", [DEAD, "skip", "fail"])
def test_a_function_that_does_not_name_its_own_tag_is_accepted(on_error: Any) -> None:
    stream = keyed().process(OtherTags(), uid="fine", on_error=on_error)
    assert isinstance(stream, sluice.DataStream)
    # Naming the tag is fine where it is not the operator's own on_error tag.
    keyed().process(ByGlobal(), uid="other", on_error=OutputTag("errors"))
    keyed().process(ByGlobal(), uid="skipping", on_error="skip")


class Co(sluice.KeyedCoProcessFunction):
    def process_element1(self, value: Any, ctx: sluice.KeyedContext) -> None:
        return None

    def process_element2(self, value: Any, ctx: sluice.KeyedContext) -> None:
        ctx.output(DEAD, value)


class Rules(sluice.KeyedBroadcastProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> None:
        return None

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.output(DEAD, value)


def test_two_input_functions_naming_their_own_on_error_tag_are_refused_before_the_start() -> None:
    env = sluice.StreamEnvironment()
    a = env.from_source(GeneratorSource(lambda i: i, count=10), uid="a")
    b = env.from_source(GeneratorSource(lambda i: i, count=10), uid="b")
    with pytest.raises(ValueError, match=r"connect\(\.\.\.\)\.process\(co\) " + REFUSED):
        a.connect(b).key_by(lambda v: v, lambda v: v).process(Co(), uid="co", on_error=DEAD)
    with pytest.raises(ValueError, match=r"Rules\.process_broadcast_element uses"):
        a.key_by(lambda v: v).connect(b.broadcast()).process(Rules(), uid="rules", on_error=DEAD)


class TagMadeInTheMethod(sluice.KeyedProcessFunction):
    def process_element(self, value: Any, ctx: sluice.KeyedContext) -> None:
        ctx.output(OutputTag("dead"), value)


def test_a_tag_made_while_processing_cannot_be_seen_before_and_is_refused_at_run_time() -> None:
    keyed().process(TagMadeInTheMethod(), uid="late", on_error=DEAD)  # nothing names the tag itself
    op = KeyedProcessOperator("late", lambda v: v, TagMadeInTheMethod(), DEAD)
    start(op)
    with pytest.raises(ValueError, match="which is this operator's on_error tag"):
        op.process_batch([1], None)
