"""Where in the stream a task failed: the operator whose code raised, and the record it was given.

A user whose map function raised wants to know which operator it was and which record broke it, not
which engine loop was running. The failure report of a subtask says so in one clause after the error:

    ZeroDivisionError: division by zero (in operator 'parse', subtask 0: record 500 of a batch of 1000
    from input channel 0: 500)

Nothing of this runs while records flow. It is read off the exception when the task has failed:
- the operator is the innermost one of the chain with a method on the failed call stack;
- the record's index in its batch is marked on the exception by an operator loop that knows it (an
  `except` around its batch loop, see `mark_record`); without that mark the batch is named, not a record;
- the input channel is the one the task was dispatching when the error came (a source names its split).
"""

from __future__ import annotations

import contextlib
import operator
import reprlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import CodeType, FrameType, TracebackType
from typing import Any, Protocol

from sluice.checkpoint.read_failures import is_storage_read_failure
from sluice.engine._unpicklable import UnpicklableRecord
from sluice.engine.chain import OperatorChain
from sluice.engine.operators.base import StreamOperator
from sluice.graph.jobgraph import JobVertex

RECORD_REPR_LIMIT = 160
"""A failure report is logged, stored in the exception history and shown on the dashboard: a record's
repr is cut to this many characters (a record may be a whole document)."""

_MARK = "_sluice_failed_record"
_CHAIN_OPEN = OperatorChain.open.__code__  # restores every operator's state, then opens it
_REPR = reprlib.Repr()
_REPR.maxstring = 80
_REPR.maxother = 80


@dataclass(frozen=True)
class _Record:
    index: int
    batch_size: int
    value: Any


def mark_record(error: BaseException, values: Sequence[Any], index: int) -> None:
    """Records on `error` that `values[index]` is the record whose processing raised it. The first mark
    stays: an operator further down the chain, closer to the raise, marked its own record first."""
    if getattr(error, _MARK, None) is None:
        # An exception type without a __dict__ keeps no mark: the report then names the batch.
        with contextlib.suppress(AttributeError, IndexError, TypeError):
            setattr(error, _MARK, _Record(index, len(values), values[index]))


def index_reached(values: Sequence[Any], records: Iterator[Any]) -> int:
    """The index in `values` of the record `records` (an iterator over `values`) gave out last: an
    operator loops over `iter(values)` and asks this in its `except`, so its loop pays nothing."""
    return len(values) - operator.length_hint(records) - 1


def capped_repr(value: Any) -> str:
    try:
        text = _REPR.repr(value)
    except Exception:  # a user's __repr__ that raises must not hide the error being reported
        return f"<{type(value).__name__} whose repr raised>"
    return text if len(text) <= RECORD_REPR_LIMIT else text[: RECORD_REPR_LIMIT - 3] + "..."


@dataclass(frozen=True)
class FailureContext:
    operator_uid: str | None
    operator_name: str | None
    subtask: int
    record: str | None
    """The record's position and repr, or the batch or split being handled; None when unknown."""

    def describe(self) -> str:
        parts = [f"subtask {self.subtask}"]
        if self.operator_uid is not None:
            named = (
                f" ({self.operator_name})"
                if self.operator_name and self.operator_name != self.operator_uid
                else ""
            )
            parts.insert(0, f"in operator {self.operator_uid!r}{named}")
        text = ", ".join(parts)
        return f"{text}: {self.record}" if self.record else text


def _frames(trace: TracebackType | None) -> list[FrameType]:
    frames = []
    while trace is not None:
        frames.append(trace.tb_frame)
        trace = trace.tb_next
    return frames


def _codes(trace: TracebackType | None) -> set[CodeType]:
    return {frame.f_code for frame in _frames(trace)}


def failure_context(
    error: BaseException,
    operators: Sequence[StreamOperator],
    names: dict[str, str],
    subtask: int,
    dispatcher: object,
) -> FailureContext:
    """Where `error`, raised out of the task `dispatcher` (its `_dispatch` names the input channel),
    came from among `operators` (its chain; `names`: each uid's name)."""
    frames = _frames(error.__traceback__)
    chain = {id(op): op for op in operators}
    channel: int | None = None
    innermost: tuple[StreamOperator, FrameType] | None = None
    for frame in frames:  # outermost first
        owner = frame.f_locals.get("self")
        if owner is dispatcher and frame.f_code.co_name == "_dispatch":
            channel = frame.f_locals.get("channel")
        elif owner is not None and id(owner) in chain:
            innermost = (chain[id(owner)], frame)
    if innermost is None and isinstance(error, UnpicklableRecord) and operators:
        # Sent by the task, not inside an operator: the last operator of the chain emitted it.
        tail = operators[-1]
        return FailureContext(tail.uid, names.get(tail.uid), subtask, "a record it emitted")
    if innermost is None:
        return FailureContext(None, None, subtask, None)
    op, frame = innermost
    # A chained operator's batch is what its predecessor made of the channel's: not the channel's own.
    from_channel = channel if op is operators[0] else None
    return FailureContext(op.uid, names.get(op.uid), subtask, _position(error, frame, from_channel))


class FailedTask(Protocol):
    chain: OperatorChain
    vertex: JobVertex
    subtask_index: int


def failure_report(error: BaseException, task: FailedTask) -> tuple[str, bool | None]:
    """What a failed subtask reports: the error and where it came from (see `failure_context`), and
    True when it is the store failing while the chain read the state it restores (the job suspends:
    `sluice.checkpoint.read_failures`)."""
    names = {spec.uid: spec.name for spec in task.vertex.operators}
    where = failure_context(error, task.chain.operators, names, task.subtask_index, task)
    restoring = _CHAIN_OPEN in _codes(error.__traceback__)
    storage = restoring and is_storage_read_failure(error)
    return f"{type(error).__name__}: {error} ({where.describe()})", storage or None


def _position(error: BaseException, frame: FrameType, channel: int | None) -> str | None:
    source = f" from input channel {channel}" if channel is not None else ""
    record: _Record | None = getattr(error, _MARK, None)
    if record is not None:
        return f"record {record.index} of a batch of {record.batch_size}{source}: {capped_repr(record.value)}"
    local = frame.f_locals
    values = local.get("values")
    if isinstance(values, list):
        return f"a batch of {len(values)} records{source}"
    split = local.get("split_id")
    if isinstance(split, int) and frame.f_code.co_name == "_poll":
        return f"reading split {split}{_split_position(local.get('self'), split)}"
    return None


def _split_position(source_operator: object, split: int) -> str:
    """Where the split's reader stands now, after the read that failed (the position a checkpoint would
    store, so for a log the offset after the records it had read): the failing read is at or before it."""
    reader = getattr(source_operator, "_readers", {}).get(split)
    if reader is None:
        return ""
    try:
        return f", its reader now at {capped_repr(reader.position())}"
    except Exception:  # the reader that just failed may not know its position either
        return ""
