"""The operator lifecycle (FLIP-147):

    initialize_state -> open -> process_batch / process_watermark ... -> end_input(i) -> finish
        -> snapshot_state -> notify_checkpoint_complete -> close

`finish` flushes buffered data and may still emit; `close` only releases resources and is also called
when the task fails or stops without draining. After `finish` an operator accepts no more records but
still takes part in checkpoints until the task ends.
"""

from __future__ import annotations

from typing import Any, Protocol

from sluice.checkpoint.snapshot import OperatorSnapshot, RestoredState
from sluice.engine.context import OperatorContext


class Output(Protocol):
    def emit(self, values: list[Any], timestamps: list[int] | None) -> None: ...
    def emit_watermark(self, timestamp: int) -> None: ...
    def emit_idle(self, idle: bool) -> None:
        """Marks this output idle (it will not advance event time for a while) or active again."""

    def emit_side(self, tag: str, values: list[Any], timestamps: list[int] | None) -> None:
        """Records for side output `tag` (dropped when nothing reads it, as in Flink)."""


class StreamOperator:
    """Base class: forwards everything unchanged. Subclasses override what they change."""

    uid: str = ""
    #: Keyed operators need the key group split of their state and the key selector of their input.
    is_keyed: bool = False
    #: Two-input operators (connect, joins) take records through `process_input` with the input's
    #: number, and `end_input(i)` once every channel of input i ended; one-input operators through
    #: `process_batch`, with `end_input` per input edge.
    two_inputs: bool = False

    def setup(self, ctx: OperatorContext, output: Output) -> None:
        self.ctx = ctx
        self.output = output

    def initialize_state(self, restored: RestoredState | None) -> None:
        """Restore from `restored` (None on a fresh start); runs before `open`."""

    def open(self) -> None:
        pass

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        self.output.emit(values, timestamps)

    def process_input(self, input_index: int, values: list[Any], timestamps: list[int] | None) -> None:
        """A batch from input `input_index` (0 or 1) of a two-input operator."""
        self.process_batch(values, timestamps)

    def process_watermark(self, timestamp: int) -> None:
        self.output.emit_watermark(timestamp)

    def process_idle(self, idle: bool) -> None:
        """Every input went idle (or one became active again): pass it on by default."""
        self.output.emit_idle(idle)

    def end_input(self, input_index: int) -> None:
        pass

    def finish(self) -> None:
        pass

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot | None:
        return None

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        pass

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        pass

    def close(self) -> None:
        pass

    def next_processing_timer(self) -> int | None:
        """The earliest processing-time timer (ms since the epoch), or None."""
        return None

    def on_processing_time(self, now_ms: int) -> None:
        pass

    def stop_processing_timers(self) -> None:
        """Called when the task finishes: processing-time timers do not fire any more."""

    def has_pending_commits(self) -> bool:
        """Whether the last snapshot holds pre-committed transactions that a completed checkpoint commits."""
        return False

    def commit_after_finish(self, restored: RestoredState) -> None:
        """Restored as fully finished: commit what the final checkpoint pre-committed (see FullyFinished).

        Only two-phase-commit sinks have anything to do here.
        """
