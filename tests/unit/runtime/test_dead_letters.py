"""on_error on map, filter, flat_map and process: fail, skip, or dead letters on a side output."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import sluice
from sluice.engine.operators.base import StreamOperator
from sluice.engine.operators.basic import FilterOperator, FlatMapOperator, MapOperator, ProcessOperator
from sluice.engine.operators.keyed import KeyedProcessOperator
from sluice.side_outputs import MAX_ERROR_CHARS, FailedRecord, OutputTag, describe_error

from ._support import RecordingOutput, start

BAD = OutputTag("bad")


def started(op: StreamOperator) -> tuple[RecordingOutput, Any]:
    return start(op)


def inverse(x: int) -> float:
    return 1 / x


def test_map_dead_letters_keep_the_record_its_timestamp_and_the_error() -> None:
    op = MapOperator("parse", inverse, BAD)
    out, ctx = started(op)
    op.process_batch([1, 0, 2, 0], [10, 20, 30, 40])
    assert out.timestamped == [(1.0, 10), (0.5, 30)]
    error = "ZeroDivisionError: division by zero"
    assert out.side == {"bad": [(FailedRecord(0, error, "parse"), 20), (FailedRecord(0, error, "parse"), 40)]}
    assert ctx.metrics.dead_letters == 2
    assert ctx.metrics.records_skipped == 0


def test_skip_drops_and_counts() -> None:
    op = MapOperator("parse", inverse, "skip")
    out, ctx = started(op)
    op.process_batch([0, 4, 0], None)
    assert out.records == [0.25]
    assert out.side == {}
    assert ctx.metrics.records_skipped == 2


def test_fail_is_the_default_and_fails_the_task() -> None:
    op = MapOperator("parse", inverse)
    started(op)
    with pytest.raises(ZeroDivisionError):
        op.process_batch([1, 0], None)


def test_filter_and_flat_map_dead_letters() -> None:
    flt = FilterOperator("f", lambda x: 10 // x > 2, BAD)
    out, _ = started(flt)
    flt.process_batch([1, 0, 5], None)
    assert out.records == [1]
    assert [f.value for f, _ in out.side["bad"]] == [0]

    def halves(x: int) -> Iterator[int]:
        yield x
        if x < 0:
            raise ValueError("negative")
        yield x // 2

    fm = FlatMapOperator("fm", halves, BAD)
    out, _ = started(fm)
    fm.process_batch([4, -1, 6], [1, 2, 3])
    # Whole or nothing: the -1 that was yielded before the error is not emitted.
    assert out.timestamped == [(4, 1), (2, 1), (6, 3), (3, 3)]
    assert [(f.value, f.error, ts) for f, ts in out.side["bad"]] == [(-1, "ValueError: negative", 2)]


class Checked(sluice.ProcessFunction):
    def process_element(self, value: Any, timestamp: int | None) -> Iterator[Any]:
        if value == "bad":
            raise KeyError(value)
        yield value.upper()


def test_process_dead_letters() -> None:
    op = ProcessOperator("p", Checked(), BAD)
    out, _ = started(op)
    op.process_batch(["a", "bad", "b"], [5, 6, 7])
    assert out.timestamped == [("A", 5), ("B", 7)]
    assert out.side["bad"] == [(FailedRecord("bad", "KeyError: 'bad'", "p"), 6)]


class Splitter(sluice.KeyedProcessFunction):
    """Counts per key; sends odd values to side output "odd"; raises on negative values after having
    sent them to the side output and changed state."""

    def open(self, ctx: sluice.RuntimeContext) -> None:
        self.count = ctx.get_state(sluice.ValueStateDescriptor("count", default=0))

    def process_element(self, value: Any, ctx: sluice.KeyedContext) -> Iterator[Any]:
        if value[1] % 2:
            ctx.output(OutputTag("odd"), value)
        if value[1] < 0:
            raise ValueError("negative amount")
        count = (self.count.value() or 0) + 1
        self.count.update(count)
        yield (ctx.key, count)


def test_keyed_process_side_output_and_dead_letters() -> None:
    op = KeyedProcessOperator("split", lambda v: v[0], Splitter(), BAD)
    out, ctx = started(op)
    op.process_batch([("a", 1), ("a", 2), ("b", -3), ("a", 5)], [1, 2, 3, 4])
    assert out.timestamped == [(("a", 1), 1), (("a", 2), 2), (("a", 3), 4)]
    # The record that raised sends nothing to any side output but its dead letter.
    assert out.side["odd"] == [(("a", 1), 1), (("a", 5), 4)]
    assert out.side["bad"] == [(FailedRecord(("b", -3), "ValueError: negative amount", "split"), 3)]
    assert ctx.metrics.dead_letters == 1


def test_key_selector_errors_still_fail_a_guarded_keyed_process() -> None:
    op = KeyedProcessOperator("split", lambda v: v["key"], Splitter(), "skip")
    started(op)
    with pytest.raises(TypeError):
        op.process_batch([("a", 1)], [1])


def test_ctx_output_refuses_a_name_instead_of_a_tag() -> None:
    class Wrong(sluice.KeyedProcessFunction):
        def process_element(self, value: Any, ctx: sluice.KeyedContext) -> None:
            ctx.output("odd", value)  # type: ignore[arg-type]

    op = KeyedProcessOperator("wrong", lambda v: v, Wrong())
    started(op)
    with pytest.raises(TypeError, match=r"ctx\.output needs a sluice\.OutputTag"):
        op.process_batch([1], None)


def test_error_text_is_bounded() -> None:
    text = describe_error(ValueError("x" * 10_000_000))
    assert text.startswith("ValueError: xxx")
    assert len(text) < MAX_ERROR_CHARS + 100
    assert "more characters" in text


def test_error_whose_message_raises_still_gets_a_text() -> None:
    class Nasty(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    op = MapOperator("m", lambda v: (_ for _ in ()).throw(Nasty()), BAD)
    out, _ = started(op)
    op.process_batch([1], None)
    [(failed, _)] = out.side["bad"]
    assert failed.error.startswith("Nasty: <")


def test_outputtag_needs_a_name() -> None:
    with pytest.raises(ValueError, match="non-empty name"):
        OutputTag("")


def test_ctx_output_to_the_on_error_tag_fails_the_task() -> None:
    class Mixing(sluice.KeyedProcessFunction):
        def process_element(self, value: Any, ctx: sluice.KeyedContext) -> None:
            ctx.output(BAD, value)

    op = KeyedProcessOperator("mix", lambda v: v, Mixing(), BAD)
    started(op)
    with pytest.raises(ValueError, match="which is this operator's on_error tag"):
        op.process_batch([1], None)


class TimerSideOutput(sluice.KeyedProcessFunction):
    def process_element(self, value: Any, ctx: sluice.KeyedContext) -> None:
        ctx.timer_service.register_event_time_timer(100)

    def on_timer(self, timestamp: int, ctx: sluice.KeyedContext) -> Iterator[Any]:
        ctx.output(OutputTag("timers"), (ctx.key, timestamp))
        yield ctx.key


def test_on_timer_may_emit_to_a_side_output_with_the_timers_timestamp() -> None:
    op = KeyedProcessOperator("t", lambda v: v, TimerSideOutput())
    out, _ = started(op)
    op.process_batch(["a", "b"], [1, 2])
    op.process_watermark(100)
    assert sorted(out.timestamped) == [("a", 100), ("b", 100)]
    assert sorted(out.side["timers"]) == [(("a", 100), 100), (("b", 100), 100)]
