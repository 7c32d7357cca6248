"""The coordinator side of checkpoints: triggering, collecting acknowledgements, finalizing.

A checkpoint directory has one owner at a time. Until every acknowledgement is in, failing the
checkpoint discards it. From then on the finalizer owns it: a checkpoint whose `_metadata` reached
storage is complete, even when the attempt ended while it was being written (the next attempt restores
it and commits its transactions; the ending attempt's tasks are not told). A failed write, or a
savepoint whose attempt ended (nothing restores a savepoint), makes the finalizer discard it.
Retention discards only completed checkpoints nobody else is settling. `settle()` waits for all of
that, so the next attempt picks its checkpoint from storage that no one is still writing or deleting.

Triggering is closed from the moment an attempt ends (`abort_all`) until the next attempt's tasks are
deployed (`accept_triggers`). A trigger in between would go to TaskManagers that are going away: no
subtask would ever acknowledge it, and the checkpoint would stay pending, holding back every later one
(the job's final checkpoint too) until its timeout.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from sluice._states import CheckpointKind, CheckpointStatus, StopMode
from sluice.checkpoint.acknowledgement import Acknowledgement
from sluice.checkpoint.failures import FailureCounter
from sluice.checkpoint.metadata import CheckpointMetadata, OperatorEntry, PendingCommit, SubtaskHandle
from sluice.checkpoint.pending import CheckpointRecord, PendingCheckpoint, SnapshotStats, Waiting
from sluice.checkpoint.plan import FinishedSubtasks, SubtaskId, plan_checkpoint
from sluice.checkpoint.storage import CheckpointStorage, collect_shared, discard, write_metadata
from sluice.graph.jobgraph import JobGraph, JobVertex, finished_inputs
from sluice.transport.messages import STATE_WRITE, Abort, Complete, Decline, ToTaskManager, Trigger
from sluice_contract.rest import CheckpointsSummary

log = logging.getLogger(__name__)


class CheckpointDeclined(Exception):
    pass


@dataclass
class CheckpointConfig:
    interval_s: float | None = 10.0
    timeout_s: float = 600.0
    min_pause_s: float = 0.0
    retained: int = 1
    after_tasks_finish: bool = True
    tolerable_failures: int | None = 0
    """Counted checkpoint failures in a row before the job fails over (see `failures`); None: any."""


class CheckpointCoordinator:
    def __init__(
        self,
        graph: JobGraph,
        storage: CheckpointStorage,
        config: CheckpointConfig,
        send: Callable[[ToTaskManager, list[SubtaskId] | None], None],
        finished: Callable[[], FinishedSubtasks],
        on_intolerable: Callable[[str], None] | None = None,
    ) -> None:
        self.graph = graph
        self.storage = storage
        self.config = config
        self.send = send
        self.finished = finished
        self._next_id = 1
        """The id of the next checkpoint or savepoint: ids go up over the whole job, restarts included."""
        self.pending: dict[int, PendingCheckpoint] = {}
        self.history: list[CheckpointRecord] = []
        self.latest: CheckpointRecord | None = None
        self.latest_savepoint: CheckpointRecord | None = None
        self.last_completion = 0.0
        self.counts = {"completed": 0, "failed": 0}
        self._settling: set[asyncio.Future[Any]] = set()
        self._discarding: set[int] = set()
        self.failures = FailureCounter(config.tolerable_failures)
        self.on_intolerable = on_intolerable
        self._closed_because: str | None = None
        """Why triggering is closed (the attempt ended), or None while an attempt's tasks run."""

    # -- triggering ---------------------------------------------------------------------------------

    def trigger(
        self,
        kind: CheckpointKind = CheckpointKind.CHECKPOINT,
        target_dir: str | None = None,
        stop_mode: StopMode | None = None,
    ) -> PendingCheckpoint:
        plan = plan_checkpoint(self.graph, self.finished())
        cid = self._next_id
        self._next_id += 1
        now_ms = time.time_ns() // 1_000_000
        if kind == CheckpointKind.SAVEPOINT:
            assert target_dir is not None
            location = self.storage.savepoint_location(target_dir, cid)
        else:
            location = self.storage.checkpoint_location(cid)
        pending = PendingCheckpoint(cid, kind, location, now_ms, stop_mode, plan, Waiting(plan))
        pending.done = asyncio.get_running_loop().create_future()
        reason = None
        if self._closed_because is not None:
            reason = self._closed_because
        elif plan.any_finished and not self.config.after_tasks_finish:
            reason = "some tasks have finished and checkpoints-after-tasks-finish is off"
        elif not plan.wait:
            reason = "no task is running"
        if reason is not None:
            self._record_failure(pending, f"declined: {reason}")
            raise CheckpointDeclined(reason)
        self.pending[cid] = pending
        savepoint = kind == CheckpointKind.SAVEPOINT
        completed = self.latest.checkpoint_id if self.latest is not None else 0
        trigger = Trigger(cid, now_ms, location, savepoint, tuple(plan.to_trigger), completed)
        self.send(trigger, plan.to_trigger)
        return pending

    def on_ack(self, ack: Acknowledgement) -> None:
        pending = self.pending.get(ack.checkpoint)
        if pending is None:
            return
        subtask = (ack.vertex, ack.subtask)
        pending.acks[subtask] = ack
        pending.waiting.acknowledge(subtask)
        self._finalize_when_complete(pending)

    def _finalize_when_complete(self, pending: PendingCheckpoint) -> None:
        if not pending.waiting and not pending.finalizing:
            pending.finalizing = True
            self._track(asyncio.get_running_loop().create_task(self._finalize(pending)))

    def on_decline(self, decline: Decline) -> None:
        pending = self.pending.get(decline.checkpoint)
        if pending is not None:
            self.fail(pending, decline.reason, counted=decline.cause == STATE_WRITE)

    def on_task_finished(self, subtask: SubtaskId, drained: bool) -> None:
        """`subtask` closed. `drained`: its input ended with drain (end of input, a TERMINATE stop, or
        finished on restore), so every operator of its chain finished; without: a SUSPEND stop.

        A drained subtask closes only once a checkpoint it took after its end has completed and told
        its sinks to commit: it has no state left and nothing left to commit. A checkpoint still
        waiting for it records it as finished, as one planned after it closed would. That is the
        end of a bounded input racing a stop-with-savepoint: the stop's savepoint, triggered as the
        tasks' last checkpoint completes, completes instead of failing (and failing over) a job that
        is finishing. An undrained subtask's state would be lost that way: the checkpoint fails fast.
        """
        for pending in list(self.pending.values()):
            if subtask not in pending.waiting:
                continue
            if drained and self.config.after_tasks_finish:
                pending.waiting.acknowledge(subtask)
                self._finalize_when_complete(pending)
            else:
                self.fail(pending, f"task {self._name(subtask)} finished before acknowledging the checkpoint")

    def check_timeouts(self) -> None:
        now_ms = time.time_ns() // 1_000_000
        for pending in list(self.pending.values()):
            if now_ms - pending.trigger_ms > self.config.timeout_s * 1000:
                waiting = self._waiting_for(pending)
                reason = f"timed out after {self.config.timeout_s:g}s waiting for {waiting}"
                self.fail(pending, reason, counted=True)

    def describe_pending(self) -> list[str]:
        """Each pending checkpoint, its age and the subtasks it still waits for (up to five), for a
        message: what a job that stopped completing checkpoints is stuck on."""
        now_ms = time.time_ns() // 1_000_000
        return [
            f"{p.kind} {p.checkpoint_id} (triggered {(now_ms - p.trigger_ms) / 1000:.1f}s ago) waits for "
            + (self._waiting_for(p) if p.waiting else "its _metadata to be written")
            for p in self.pending.values()
        ]

    def _waiting_for(self, pending: PendingCheckpoint) -> str:
        return ", ".join(self._name(t) for t in pending.waiting.sample(5))

    def continue_after(self, restored_id: int) -> None:
        """An attempt restores checkpoint or savepoint `restored_id`: the ids of later ones are higher,
        so a new checkpoint never takes the directory of one that may be restored."""
        self._next_id = max(self._next_id, restored_id + 1)

    def accept_triggers(self) -> None:
        """The tasks of a new attempt are deployed: checkpoints may be triggered again."""
        self._closed_because = None

    def abort_all(self, reason: str) -> None:
        """The attempt ended: fails what is pending (except what is being finalized, see the module
        docstring) and declines triggers until `accept_triggers`."""
        self._closed_because = reason
        for pending in list(self.pending.values()):
            if pending.finalizing:
                pending.attempt_ended = reason
            else:
                self.fail(pending, reason, notify=False)

    def fail(
        self, pending: PendingCheckpoint, reason: str, notify: bool = True, counted: bool = False
    ) -> None:
        if pending.finalizing:
            return  # every acknowledgement is in: its finalizer settles it (see the module docstring)
        if self.pending.pop(pending.checkpoint_id, None) is None:
            return
        self._record_failure(pending, reason)
        log.warning("%s %d failed: %s", pending.kind, pending.checkpoint_id, reason)
        intolerable = counted and not pending.is_savepoint and self.failures.counted_failure()
        if intolerable and self.on_intolerable is not None:
            self.on_intolerable(
                f"{self.failures.describe()} (--tolerable-checkpoint-failures); the last: {reason}"
            )
        if notify:
            self.send(Abort(pending.checkpoint_id), None)
        cid = pending.checkpoint_id
        self._discarding.add(cid)
        future = asyncio.get_running_loop().run_in_executor(None, discard, pending.location)
        future.add_done_callback(lambda _: self._discarding.discard(cid))
        self._track(future)

    def _track(self, future: asyncio.Future[Any]) -> None:
        self._settling.add(future)
        future.add_done_callback(self._settled)

    def _settled(self, future: asyncio.Future[Any]) -> None:
        self._settling.discard(future)
        if future.cancelled() or future.exception() is None:
            return
        err = future.exception()
        if isinstance(err, OSError):
            # Storage trouble (no descriptor left, a vanished mount): the checkpoint has already failed
            # with its reason; what is left of its files has no _metadata, so nothing restores from it.
            log.warning("settling a failed checkpoint left files behind: %s", err)
        else:
            log.error("settling a checkpoint failed", exc_info=err)

    async def settle(self, warn_every_s: float | None = None) -> None:
        """Waits until no checkpoint is being finalized or discarded, however long that takes: a
        `_metadata` write still running may land at any moment, and whoever picks a checkpoint from
        storage before it has would pass over the newest one. Storage calls time out on their own
        (`sluice._fs`). With `warn_every_s`, says so each time that long has passed."""
        started = time.monotonic()
        warned = 0
        while self._settling:
            due = None if warn_every_s is None else started + (warned + 1) * warn_every_s
            await asyncio.wait(set(self._settling), timeout=None if due is None else due - time.monotonic())
            if self._settling and due is not None and time.monotonic() >= due:
                warned += 1
                log.warning(
                    "checkpoint storage has not settled after %.0fs: %d checkpoint write(s) or "
                    "discard(s) still running; waiting for them, so that no _metadata lands after the "
                    "next restore point is chosen",
                    time.monotonic() - started,
                    len(self._settling),
                )

    def _record_failure(self, pending: PendingCheckpoint, reason: str) -> None:
        self.counts["failed"] += 1
        self.history.append(
            CheckpointRecord(
                pending.checkpoint_id, pending.kind, CheckpointStatus.FAILED, pending.trigger_ms, error=reason
            )
        )
        if pending.done is not None and not pending.done.done():
            pending.done.set_exception(CheckpointDeclined(reason))
            pending.done.exception()  # mark retrieved: a failed periodic checkpoint is not an error

    def _name(self, subtask: SubtaskId) -> str:
        vertex = self.graph.vertex(subtask[0])
        return f"{vertex.name}[{subtask[1]}]"

    # -- finalizing ---------------------------------------------------------------------------------

    def build_metadata(self, pending: PendingCheckpoint) -> CheckpointMetadata:
        entries = [
            (vertex, position, self._operator_entry(pending, vertex, position))
            for vertex in self.graph.vertices
            for position in range(len(vertex.operators))
        ]
        # A running two-input operator whose one input ended (a bounded dimension or rules input)
        # records that input as finished: its upstream is fully finished and will not run again.
        fully = {entry.uid for _, _, entry in entries if entry.fully_finished}
        operators = [
            replace(entry, finished_inputs=finished_inputs(self.graph, vertex, fully))
            if position == 0 and not entry.fully_finished
            else entry
            for vertex, position, entry in entries
        ]
        return CheckpointMetadata(
            checkpoint_id=pending.checkpoint_id,
            job_id=self.storage.job_id,
            kind=pending.kind,
            timestamp=pending.trigger_ms,
            stop_mode=pending.stop_mode,
            operators=tuple(operators),
        )

    def _operator_entry(self, pending: PendingCheckpoint, vertex: JobVertex, position: int) -> OperatorEntry:
        spec = vertex.operators[position]
        done_at_plan = pending.plan.done.get(vertex.id, ())
        handles: list[SubtaskHandle] = []
        finished: list[int] = []
        commits: list[PendingCommit] = []
        union = False
        for s in range(vertex.parallelism):
            ack = pending.acks.get((vertex.id, s))
            if ack is None or s in done_at_plan:
                finished.append(s)
                continue
            if position >= len(ack.operators) or ack.operators[position].uid != spec.uid:
                raise CheckpointDeclined(
                    f"the acknowledgement of {vertex.name}[{s}] does not list operator {spec.uid!r} "
                    f"at position {position} of its chain"
                )
            op = ack.operators[position]
            union = union or op.union
            if op.finished:
                finished.append(s)
                commit = op.commit(s)
                if commit is not None:
                    commits.append(commit)
            elif op.path is not None or op.keyed_files:
                handles.append(op.handle(s))
        fully = len(finished) == vertex.parallelism
        if union and finished and not fully:
            raise CheckpointDeclined(
                f"operator {spec.uid!r} uses union list state and only some of its subtasks have "
                f"finished ({len(finished)} of {vertex.parallelism}); union list state cannot be "
                "checkpointed then (FLIP-147)"
            )
        return OperatorEntry(
            uid=spec.uid,
            parallelism=vertex.parallelism,
            max_parallelism=vertex.max_parallelism,
            fully_finished=fully,
            finished_subtasks=() if fully else tuple(finished),
            subtasks=() if fully else tuple(handles),
            pending_commits=tuple(commits) if fully else (),
        )

    async def _finalize(self, pending: PendingCheckpoint) -> None:
        try:
            metadata = self.build_metadata(pending)
            await asyncio.to_thread(write_metadata, pending.location, metadata, self.storage.key)
        except Exception as err:
            reason = (
                str(err)
                if isinstance(err, CheckpointDeclined)
                else f"writing _metadata failed: {type(err).__name__}: {err}"
            )
            pending.finalizing = False  # back to the failing path, which discards it
            counted = not isinstance(err, CheckpointDeclined)
            self.fail(pending, reason, notify=pending.attempt_ended is None, counted=counted)
            return
        if pending.attempt_ended is not None and pending.is_savepoint:
            pending.finalizing = False
            self.fail(pending, pending.attempt_ended, notify=False)
            return
        self.pending.pop(pending.checkpoint_id, None)
        now_ms = time.time_ns() // 1_000_000
        fully = [op.uid for op in metadata.operators if op.fully_finished]
        record = CheckpointRecord(
            pending.checkpoint_id,
            pending.kind,
            CheckpointStatus.COMPLETED,
            pending.trigger_ms,
            now_ms,
            pending.location,
            fully_finished=fully,
            finished_subtasks=sum(len(d) for d in pending.plan.done.values()),
            stats=SnapshotStats.of_acks(pending.acks.values()),
        )
        self.history.append(record)
        self.counts["completed"] += 1
        self.last_completion = time.monotonic()
        if pending.is_savepoint:
            self.latest_savepoint = record
        else:
            self.latest = record
            self.failures.completed()
        if pending.commits and pending.attempt_ended is None:
            self.send(Complete(pending.checkpoint_id), None)
        if pending.done is not None and not pending.done.done():
            pending.done.set_result(replace(metadata, location=pending.location))
        if not pending.is_savepoint:
            await self._apply_retention(pending.checkpoint_id)

    async def _apply_retention(self, completed_id: int) -> None:
        """Discards the completed checkpoints beyond `retained`, once checkpoint `completed_id` is in."""
        completed = [
            r.checkpoint_id
            for r in self.history
            if r.status == CheckpointStatus.COMPLETED and r.kind == CheckpointKind.CHECKPOINT
        ]
        keep = set(completed[-max(1, self.config.retained) :])
        # Failed ones being discarded and pending ones are someone else's to settle.
        busy = set(self._discarding) | set(self.pending)
        # Fixed here, on the event loop, not read in the thread: a checkpoint triggered while the
        # thread runs is in neither `busy` nor storage's completed ones, and its shared files, written
        # before its `_metadata`, must not look unreferenced.
        written_before = min([*busy, self._next_id])
        try:
            await asyncio.to_thread(self._retain, keep, busy, written_before)
        except Exception as err:
            # Storage failing: the checkpoint is complete all the same, and the next completion
            # discards what this one left.
            log.warning(
                "discarding checkpoints older than %d failed: %s: %s", completed_id, type(err).__name__, err
            )

    def _retain(self, keep: set[int], busy: set[int], written_before: int) -> None:
        for cid in self.storage.completed_ids():
            if cid not in keep and cid not in busy and cid < max(keep, default=0):
                discard(self.storage.checkpoint_location(cid))
        # Incremental keyed state: files no checkpoint left refers to go too (not those of pending ones,
        # nor of checkpoints triggered since `written_before` was taken).
        collect_shared(self.storage, written_before)

    def as_json(self) -> dict[str, Any]:
        summary = CheckpointsSummary(
            latest=self.latest.summary() if self.latest else None,
            history=tuple(r.summary() for r in reversed(self.history[-50:])),
        )
        return {
            **summary.to_json(),
            "counts": {**self.counts, "inProgress": len(self.pending)},
            "latestSavepoint": self.latest_savepoint.as_json() if self.latest_savepoint else None,
            "inProgress": [
                {
                    "id": p.checkpoint_id,
                    "kind": p.kind,
                    "triggerTime": p.trigger_ms,
                    "waitingFor": len(p.waiting),
                }
                for p in self.pending.values()
            ],
        }
