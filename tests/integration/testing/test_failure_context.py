"""A user function that raises fails its task with a report naming where: the operator's uid (and its
name, when it has one of its own), the subtask, the record's position in its batch and a capped repr of
the record; a sink's failure names the batch it was writing. Run in one process (`sluice.testing`),
with no restarts, so the job's error is the report itself."""

from __future__ import annotations

import re
from typing import Any

import sluice
import sluice.connectors
from sluice.connectors import SequenceSource
from sluice.engine._failure_context import RECORD_REPR_LIMIT
from sluice.testing import CollectingSink, FailingSource, run_job

NO_RESTARTS = ("--max-restarts", "0")


def _failure(build: Any) -> str:
    outcome = run_job(build, *NO_RESTARTS)
    assert outcome.state == "FAILED", outcome
    assert outcome.error is not None
    task, sep, error = outcome.error.partition(" failed: ")  # "task <vertex>[<subtask>] failed: ..."
    assert task.startswith("task ") and sep, outcome.error
    return error


def _record_position(error: str) -> tuple[int, int]:
    found = re.search(r"record (\d+) of a batch of (\d+)", error)
    assert found is not None, error
    index, size = int(found.group(1)), int(found.group(2))
    assert 0 <= index < size, error
    return index, size


def test_a_chained_map_names_its_uid_the_subtask_and_the_record() -> None:
    def parse(i: int) -> int:
        return 1 // (i - 700)

    def build(env: sluice.StreamEnvironment) -> None:
        env.from_source(SequenceSource(0, 1000), uid="numbers").map(parse, uid="parse").sink_to(
            CollectingSink(), uid="sink"
        )

    error = _failure(build)
    assert error.startswith("ZeroDivisionError: integer division or modulo by zero"), error
    assert "in operator 'parse', subtask 0: " in error, error
    _record_position(error)
    assert error.endswith(": 700)"), error  # the record itself, after its position
    assert "input channel" not in error  # chained behind the source: its batch is the source's


def test_the_head_of_a_task_names_the_input_channel_and_a_named_operator_its_name() -> None:
    def build(env: sluice.StreamEnvironment) -> None:
        (
            env.from_source(SequenceSource(0, 1000), uid="numbers")
            .rebalance()
            .filter(lambda i: i < 600 or i / 0, uid="keep", name="keep small numbers")
            .sink_to(CollectingSink(), uid="sink")
        )

    error = _failure(build)
    assert "in operator 'keep' (keep small numbers), subtask 0: record " in error, error
    _record_position(error)
    assert " from input channel 0: 600)" in error, error


def test_a_flat_map_names_the_record_its_generator_raised_on() -> None:
    def explode(i: int) -> Any:
        yield i
        if i == 123:
            raise ValueError(f"cannot split {i}")
        yield -i

    def build(env: sluice.StreamEnvironment) -> None:
        env.from_source(SequenceSource(0, 500), uid="numbers").flat_map(explode, uid="explode").sink_to(
            CollectingSink(), uid="sink"
        )

    error = _failure(build)
    assert error.startswith("ValueError: cannot split 123 (in operator 'explode', subtask 0: record "), error
    _record_position(error)
    assert error.endswith(": 123)"), error


def test_a_process_function_names_its_record_and_a_long_record_is_cut() -> None:
    class Check(sluice.ProcessFunction):
        def process_element(self, value: Any, timestamp: int | None) -> Any:
            if value[0] == 42:
                raise KeyError("no such customer")
            return [value]

    def build(env: sluice.StreamEnvironment) -> None:
        (
            env.from_source(SequenceSource(0, 100), uid="numbers")
            .map(lambda i: (i, "x" * 10_000), uid="document")
            .process(Check(), uid="check")
            .sink_to(CollectingSink(), uid="sink")
        )

    error = _failure(build)
    assert "in operator 'check', subtask 0: record " in error, error
    _record_position(error)
    record = re.sub(r"^.* of a batch of \d+: ", "", error)
    assert record.startswith("(42, 'xxx") and "..." in record, error
    assert len(record) <= RECORD_REPR_LIMIT + 1, error  # and the closing parenthesis of the report


def test_a_sink_that_raises_names_the_batch_it_was_writing() -> None:
    class Broken(sluice.connectors.Sink):
        def create_writer(self, subtask_index: int, parallelism: int) -> sluice.connectors.SinkWriter:
            return Writer()

    class Writer(sluice.connectors.SinkWriter):
        def write(self, values: list[Any], timestamps: list[int] | None) -> None:
            raise ConnectionError("the database went away")

        def flush(self) -> None:
            pass

        def close(self) -> None:
            pass

    def build(env: sluice.StreamEnvironment) -> None:
        env.from_source(SequenceSource(0, 10), uid="numbers").rebalance().sink_to(Broken(), uid="db")

    error = _failure(build)
    assert error.startswith("ConnectionError: the database went away (in operator 'db', subtask 0: "), error
    assert re.search(r"a batch of \d+ records from input channel 0\)$", error), error


def test_a_source_that_fails_to_read_names_its_split_and_where_it_stood() -> None:
    def build(env: sluice.StreamEnvironment) -> None:
        source = FailingSource(SequenceSource(0, 100), fail_on=lambda i: i == 50)
        env.from_source(source, uid="numbers").sink_to(CollectingSink(), uid="sink")

    error = _failure(build)
    assert error.startswith("InjectedFailure: FailingSource: injected failure at record 50 "), error
    # SequenceSource reads its split in one go: the read that failed had taken the whole split.
    assert error.endswith(
        "(in operator 'numbers', subtask 0: reading split 0, its reader now at "
        "SequenceSplit(split_id=0, next=100, end=100))"
    ), error


class _Balance(sluice.functions.KeyedProcessFunction):
    def process_element(self, value: int, ctx: Any) -> list[int]:
        if value == 321:
            raise KeyError(f"no account for {value}")
        return [value]


def test_a_keyed_process_function_and_a_keyed_reduce_name_the_record_they_raised_on() -> None:
    def keyed_process(env: sluice.StreamEnvironment) -> None:
        (
            env.from_source(SequenceSource(0, 1000), uid="numbers")
            .key_by(lambda i: i % 7)
            .process(_Balance(), uid="balance")
            .sink_to(CollectingSink(), uid="sink")
        )

    error = _failure(keyed_process)
    assert "in operator 'balance', subtask 0: record " in error, error
    _record_position(error)
    assert error.endswith(": 321)"), error

    def keyed_reduce(env: sluice.StreamEnvironment) -> None:
        (
            env.from_source(SequenceSource(0, 1000), uid="numbers")
            .key_by(lambda i: i % 7)
            .reduce(lambda total, i: total + 1 // (i - 456), uid="total")
            .sink_to(CollectingSink(), uid="sink")
        )

    error = _failure(keyed_reduce)
    assert "in operator 'total', subtask 0: record " in error, error
    _record_position(error)
    assert error.endswith(": 456)"), error
