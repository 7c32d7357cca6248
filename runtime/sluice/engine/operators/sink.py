"""Sink operators: plain (at-least-once) and two-phase commit (exactly-once).

Two-phase commit over the checkpoint protocol:
  1. records are written into the open transaction (begun lazily; never after `finish`);
  2. at a checkpoint's snapshot the transaction is pre-committed and its committable stored in the
     checkpoint, tagged with the checkpoint id;
  3. when checkpoint n completes, every committable tagged <= n is committed (a committable of a
     checkpoint that failed is carried along and committed by the next completed one);
  4. on restore, the committables found in the checkpoint are committed again (commit is idempotent);
  5. `close` aborts a transaction that was never pre-committed;
  6. once the first checkpoint after a start completes (every restored committable is committed by
     then), the sink removes what earlier attempts left behind (`clean_up`);
  7. when the job ends for good without a later checkpoint (canceled, or failed with no restart left),
     pre-committed transactions that no completed checkpoint or savepoint holds are discarded, and
     those a completed checkpoint holds but whose completion had not reached the sink are committed.
"""

from __future__ import annotations

import logging
from typing import Any

from sluice.checkpoint.snapshot import OperatorSnapshot, RestoredState
from sluice.connectors.base import Sink, SinkWriter, TransactionContext, TwoPhaseCommitSink
from sluice.engine.operators.base import StreamOperator

log = logging.getLogger(__name__)


class SinkOperator(StreamOperator):
    def __init__(self, uid: str, sink: Sink) -> None:
        self.uid = uid
        self.sink = sink
        self._writer: SinkWriter | None = None

    def open(self) -> None:
        self._writer = self.sink.create_writer(self.ctx.subtask_index, self.ctx.parallelism)

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        assert self._writer is not None
        self._writer.write(values, timestamps)
        self.ctx.metrics.records_out += len(values)

    def process_watermark(self, timestamp: int) -> None:
        pass

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot | None:
        if self._writer is not None:
            self._writer.flush()
        return None

    def finish(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class TwoPhaseCommitSinkOperator(StreamOperator):
    def __init__(self, uid: str, sink: TwoPhaseCommitSink[Any, Any]) -> None:
        self.uid = uid
        self.sink = sink
        self._txn: Any = None
        self._pending: list[tuple[int, Any]] = []
        self._finished = False
        self._cleaned_up = False

    def initialize_state(self, restored: RestoredState | None) -> None:
        self._txn_ctx = TransactionContext(
            self.ctx.job_id, self.uid, self.ctx.subtask_index, self.ctx.attempt, self.ctx.attempt_token
        )
        recommitted: list[Any] = []
        if restored is not None:
            for _, committable in restored.lists.get("pending", []):
                self.sink.commit(committable)
                recommitted.append(committable)
        self.sink.recover(self._txn_ctx, recommitted, restored.checkpoint_id if restored is not None else 0)

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        if self._finished:
            raise RuntimeError(f"sink {self.uid!r} received records after finish()")
        if self._txn is None:
            self._txn = self.sink.begin(self._txn_ctx)
        self.sink.write(self._txn, values, timestamps)
        self.ctx.metrics.records_out += len(values)

    def process_watermark(self, timestamp: int) -> None:
        pass

    def finish(self) -> None:
        # The open transaction is pre-committed by the next (final) checkpoint; no new one starts.
        self._finished = True

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot | None:
        if self._txn is not None:
            self._pending.append((checkpoint_id, self.sink.pre_commit(self._txn, checkpoint_id)))
            self._txn = None
        return OperatorSnapshot(lists={"pending": list(self._pending)}) if self._pending else None

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        due = [c for c in self._pending if c[0] <= checkpoint_id]
        for entry in due:
            self.sink.commit(entry[1])
            self._pending.remove(entry)
        if not self._cleaned_up:
            self._cleaned_up = True
            try:
                self.sink.clean_up(self._txn_ctx, self.ctx.parallelism)
            except Exception as err:  # leftovers cost space, not correctness: the job goes on
                log.warning("sink %s could not remove what earlier attempts left: %s", self.uid, err)

    def close(self) -> None:
        if self._txn is not None:
            txn, self._txn = self._txn, None
            self.sink.abort(txn)

    def release_at_job_end(self, latest_checkpoint: int, savepoints: frozenset[int]) -> None:
        """Step 6: nothing will restore this job, so nothing will commit or discard these later."""
        for entry in list(self._pending):
            checkpoint_id, committable = entry
            if checkpoint_id <= latest_checkpoint:
                self.sink.commit(committable)
            elif checkpoint_id not in savepoints:
                # A savepoint's transactions stay: a job started from it commits them.
                self.sink.discard(committable)
            else:
                continue
            self._pending.remove(entry)

    def has_pending_commits(self) -> bool:
        return bool(self._pending)

    def commit_after_finish(self, restored: RestoredState) -> None:
        for _, committable in restored.lists.get("pending", []):
            self.sink.commit(committable)
