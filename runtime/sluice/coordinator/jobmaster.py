"""The job master: runs one job through attempts until it ends FINISHED, FAILED or CANCELED.

Or until the coordinator itself is shut down (`suspend`, on SIGTERM): then the job is SUSPENDED, which
is not an end. No job result is stored and the checkpoints stay, so a coordinator started again with
the same job id (a replaced pod) restores the latest checkpoint and carries on, as Flink's JobManager
does after a fail-over.

An attempt: start TaskManagers on the host, wait until all registered, deploy every subtask (restoring
from the latest completed checkpoint, or the savepoint the job starts from), then tick until every
subtask has finished: at each tick the finishing state machine (`sluice.checkpoint.finishing`) triggers
what is due, a periodic checkpoint, the final one or a stop's savepoint. Any failure (a subtask fails, a
TaskManager is lost) ends the attempt: all TaskManagers are stopped and the restart strategy decides
whether a new attempt restores from the latest completed checkpoint (restart all, as FLIP-147's first
version) or the job fails.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import cloudpickle

from sluice._states import CheckpointKind, CheckpointStatus, JobState, StopMode, SubtaskState
from sluice._waiting import wait_event
from sluice.checkpoint.acknowledgement import Acknowledgement
from sluice.checkpoint.coordinator import CheckpointConfig, CheckpointCoordinator
from sluice.checkpoint.finishing import Finishing
from sluice.checkpoint.metadata import CheckpointMetadata
from sluice.checkpoint.plan import SubtaskId
from sluice.checkpoint.state_key import StateKey, load_state_key
from sluice.checkpoint.storage import CheckpointStorage
from sluice.coordinator._attempt_events import (
    AttemptEnded,
    AttemptEvent,
    AttemptFailed,
    EndRequested,
    TasksFinished,
    stop_failure,
)
from sluice.coordinator._attempt_tasks import AttemptTasks
from sluice.coordinator._failure_text import FailureLog
from sluice.coordinator._restore_info import RestoredFrom, RestoreFailed
from sluice.coordinator._restore_point import read_restore_metadata, restore_point
from sluice.coordinator.control import DEFAULT_HEARTBEAT_TIMEOUT_S, ControlServer, Report, TaskManagerLink
from sluice.coordinator.restart import RestartStrategy
from sluice.coordinator.result_store import JobResult, read_result, store_result
from sluice.coordinator.savepoints import Savepoints
from sluice.coordinator.validation import validate_restore
from sluice.engine.wiring import placement
from sluice.graph.jobgraph import JobGraph
from sluice.hosts.base import TaskManagerHost
from sluice.transport.messages import (
    Decline,
    Deploy,
    Figures,
    JobEnd,
    Message,
    MetricsReport,
    TaskReport,
    encode_blob,
)
from sluice.transport.secret import DEFAULT_MAX_FRAME_BYTES
from sluice.transport.tls import generate_job_ca

log = logging.getLogger(__name__)
TICK_S = 0.05


@dataclass
class JobConfig:
    checkpoint_dir: str
    job_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    checkpoints: CheckpointConfig = field(default_factory=CheckpointConfig)
    taskmanagers: int = 1
    restart: RestartStrategy = field(default_factory=RestartStrategy)
    from_savepoint: str | None = None
    allow_non_restored_state: bool = False
    savepoint_dir: str | None = None
    registration_timeout_s: float = 120.0
    heartbeat_timeout_s: float = DEFAULT_HEARTBEAT_TIMEOUT_S
    """A TaskManager silent this long is lost: the attempt fails and the restart strategy decides."""
    internal_tls: bool = False
    """TLS on control and data connections, with a certificate authority made for the job."""
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    state_key: StateKey | None = None
    """Authenticates the `_metadata` of checkpoints and savepoints; None: the user's key file
    (`sluice.checkpoint.state_key.load_state_key`)."""
    trust_savepoint: bool = False
    """`from_savepoint` is restored even when its `_metadata` was not made with this deployment's key
    (another deployment's savepoint, or one from before MACs). Never the job's own checkpoints."""


class JobMaster:
    def __init__(self, graph: JobGraph, config: JobConfig, host: TaskManagerHost) -> None:
        self.graph = graph
        self.config = config
        self.host = host
        key = config.state_key or load_state_key()
        self.storage = CheckpointStorage(config.checkpoint_dir, config.job_id, key)
        self.state: JobState = JobState.CREATED
        self.attempt = 0
        self.restarts = 0
        self._restart_backoff = config.restart.backoff()
        self.error: str | None = None
        self.start_ms = time.time_ns() // 1_000_000
        self.end_ms: int | None = None
        self._tasks = AttemptTasks()
        self.placement: dict[SubtaskId, int] = {}
        self.metrics: dict[str, Figures] = {}
        self.ended = asyncio.Event()
        self.result: JobResult | None = None
        self.restored: RestoredFrom | None = None
        """The snapshot the latest attempt restored (None: it started empty)."""
        self.restore_failure: RestoreFailed | None = None
        """Set when the job stopped because its state could not be restored (it is SUSPENDED then)."""
        self.on_restore: Callable[[RestoredFrom], None] | None = None
        self._events: asyncio.Queue[AttemptEvent] = asyncio.Queue()
        # Set when something a trigger rule reads has changed (a task reached its end or finished, a
        # checkpoint that held back the next step completed): the next tick runs at once instead of up
        # to TICK_S later, so a bounded job's final checkpoint starts as its last task reaches end of data.
        self._progressed = asyncio.Event()
        self._failures = FailureLog()
        self.exceptions = self._failures.history
        self._failing: str | None = None
        """Why the current attempt failed, once something failed it (its end is then on its way)."""
        # cancel() or suspend(): how the job is asked to end, seen at every stage of an attempt.
        self._end_request: EndRequested | None = None
        self._end_requested = asyncio.Event()
        self._control = ControlServer(
            self._on_message,
            self._on_lost,
            max_frame_bytes=config.max_frame_bytes,
            tls=generate_job_ca(config.job_id) if config.internal_tls else None,
            heartbeat_timeout_s=config.heartbeat_timeout_s,
        )
        self._graph_blob = encode_blob(cloudpickle.dumps(graph))
        # One coordinator for the whole job: its history, counts and checkpoint ids span restarts.
        self.checkpoints = CheckpointCoordinator(
            graph,
            self.storage,
            config.checkpoints,
            self._send,
            lambda: self._tasks.finished,
            on_intolerable=self._fail_attempt,
        )
        # The final checkpoint and stop-with-savepoint: what is triggered at each tick, and when.
        self.finishing = Finishing(
            config.checkpoints,
            trigger=self._trigger,
            broadcast=self._control.broadcast,
            fail_attempt=self._fail_attempt,
        )
        self.savepoints = Savepoints(
            storage=self.storage,
            trigger=self._trigger,
            finishing=self.finishing,
            job_state=lambda: self.state,
            default_dir=config.savepoint_dir,
        )

    # -- observed state -------------------------------------------------------------------------------

    @property
    def subtasks(self) -> dict[SubtaskId, SubtaskState]:
        """The state of each subtask of the current attempt, as last reported."""
        return self._tasks.states

    # -- running the job -----------------------------------------------------------------------------

    async def run(self) -> JobResult:
        stored = await asyncio.to_thread(
            read_result, self.storage.job_dir, self.config.job_id, self.storage.key
        )
        if stored is not None:
            return self._adopt(stored)
        await self._control.start(self.host.control_bind_host())
        try:
            await self._run_attempts()
        finally:
            self.end_ms = time.time_ns() // 1_000_000
            self.result = self._result()
            # Only an end is stored. A suspended job goes on with the next coordinator, and so does one
            # whose coordinator failed here (an exception on its way out): a stored result would end it.
            if self.state.ended:
                await store_result(self.storage.job_dir, self.result, self.storage.key)
            await self._control.close()
            self.ended.set()
        return self.result

    def _adopt(self, stored: JobResult) -> JobResult:
        """The job ended under an earlier coordinator: show that end, run nothing."""
        self.state, self.result = stored.state, stored
        self.savepoints.last = stored.last_savepoint
        self.savepoints.stopped_with = stored.stop_savepoint
        self.savepoints.stop_request_id = stored.stop_request_id
        self.error = stored.error
        self.ended.set()
        return stored

    async def _run_attempts(self) -> None:
        """Attempt after attempt until one ends the job (self.state is then its end)."""
        restore = self.config.from_savepoint
        while True:
            try:
                restore = await restore_point(self.storage, self.checkpoints.latest, restore)
                await self._attempt(restore)
            except AttemptEnded as ended:
                event = ended.event
            # A damaged snapshot stays damaged: retrying its restore only delays saying so.
            permanent = isinstance(event, RestoreFailed) and event.permanent
            delay = (
                self._restart_backoff.on_failure()
                if isinstance(event, AttemptFailed) and not permanent
                else None
            )
            # Canceled, or failed with no restart left: no restore will commit or discard what the
            # sinks pre-committed. (A suspended job keeps it all for the run that resumes it.)
            ends_for_good = delay is None and event.end in (JobState.CANCELED, JobState.FAILED)
            await self._end_attempt(event, ends_for_good=ends_for_good)
            if isinstance(event, AttemptFailed):
                self.error = event.reason
                self._failures.attempt_failed(self.attempt, event.reason)
            if delay is None:
                self.state = event.end
                if isinstance(event, RestoreFailed):
                    self.restore_failure = event
                return
            if not await self._restart_after(delay):
                return

    async def _restart_after(self, delay: float) -> bool:
        """Waits out the restart delay; False if the job was asked to end meanwhile (its state is set)."""
        log.warning("attempt %d failed: %s; restarting in %.1fs", self.attempt, self.error, delay)
        self.state = JobState.RESTARTING
        self.restarts += 1
        self.attempt += 1
        await wait_event(self._end_requested, delay)
        if self._end_request is not None:
            self.state = self._end_request.state
            return False
        return True

    def _result(self) -> JobResult:
        latest = self.checkpoints.latest.path if self.checkpoints.latest else None
        if latest is None and self.restored is not None and self.restored.kind == CheckpointKind.CHECKPOINT:
            latest = self.restored.path  # retained: no checkpoint completed since it was restored
        error = None if self.state == JobState.FINISHED else self.error
        if self.state in (JobState.SUSPENDED, JobState.CANCELED) and self._end_request is not None:
            error = self._end_request.reason
        savepoints = self.savepoints
        return JobResult.now(
            self.config.job_id,
            self.state,
            savepoints.last,
            savepoints.stopped_with,
            latest,
            error,
            stop_request_id=savepoints.stop_request_id,
        )

    async def _attempt(self, restore: str | None) -> NoReturn:
        """Runs one attempt; it ends by raising AttemptEnded."""
        metadata = None
        if restore is not None:
            config = self.config
            metadata = await read_restore_metadata(
                restore, self.storage.key, config.from_savepoint, config.trust_savepoint
            )
            dropped = validate_restore(self.graph, metadata, self.config.allow_non_restored_state)
            self.checkpoints.continue_after(metadata.checkpoint_id)
            self._restored(metadata, dropped)
        self.state = JobState.CREATED if self.attempt == 0 else JobState.RESTARTING
        self._attempt_token = uuid.uuid4().hex[:12]
        self._events = asyncio.Queue()
        self._progressed.clear()
        if self._end_request is not None:
            # Cancel or suspend asked for before this attempt's queue existed (at start-up, or between
            # a restart's delay and here): the new queue must not lose it.
            self._events.put_nowait(self._end_request)
        self._failing = None
        self._tasks = AttemptTasks(self.graph, metadata)
        self.placement = placement(self.graph, self.config.taskmanagers)
        self.checkpoints.failures.reset()
        self._control.expect(self.config.taskmanagers, self.attempt)
        try:
            await self.host.start(self.config.taskmanagers, self._control.launch(), self.attempt)
        except OSError as err:
            # Out of descriptors or processes (a flood of connections, say): the restart strategy
            # decides, as for a lost TaskManager, instead of the coordinator dying with a traceback.
            raise AttemptEnded(
                AttemptFailed(f"starting TaskManagers failed: {type(err).__name__}: {err}")
            ) from err
        lost = asyncio.ensure_future(self.host.wait_lost())
        try:
            await self._await_registration(lost)
            self._deploy(metadata)
            self.checkpoints.accept_triggers()
            self.finishing.attempt_started(time.monotonic())
            self.state = JobState.RUNNING
            await self._drive(lost)
        finally:
            lost.cancel()

    def _restored(self, metadata: CheckpointMetadata, dropped: list[str]) -> None:
        restored = RestoredFrom.of(metadata, self.attempt, dropped)
        # Said once per snapshot: every restart restores the latest checkpoint again.
        if self.on_restore is not None and (self.restored is None or self.restored.path != restored.path):
            self.on_restore(restored)
        self.restored = restored

    async def _await_registration(self, lost: asyncio.Future[str]) -> None:
        registered: asyncio.Future[Any] = asyncio.ensure_future(self._control.registered.wait())
        # TaskManagers may take long to come (executor pods pending): a cancel must not wait for them.
        ending: asyncio.Future[Any] = asyncio.ensure_future(self._end_requested.wait())
        waiting: set[asyncio.Future[Any]] = {registered, lost, ending}
        done, _ = await asyncio.wait(
            waiting,
            timeout=self.config.registration_timeout_s,
            return_when=asyncio.FIRST_COMPLETED,
        )
        registered.cancel()
        ending.cancel()
        if lost in done:
            raise AttemptEnded(AttemptFailed(lost.result()))
        if self._end_request is not None:
            raise AttemptEnded(self._end_request)
        if registered not in done:
            raise AttemptEnded(
                AttemptFailed(
                    f"only {len(self._control.links)} of {self.config.taskmanagers} TaskManagers "
                    f"registered within {self.config.registration_timeout_s:g}s"
                )
            )

    def _deploy(self, metadata: CheckpointMetadata | None) -> None:
        addresses = {i: (link.host, link.data_port) for i, link in self._control.links.items()}
        for index, link in self._control.links.items():
            link.send(
                Deploy(
                    attempt=self.attempt,
                    job_id=self.config.job_id,
                    graph=self._graph_blob,
                    tasks=tuple(t for t, tm in self.placement.items() if tm == index),
                    placement=self.placement,
                    taskmanagers=addresses,
                    restore=metadata.location if metadata else None,
                    restore_digest=metadata.digest if metadata else None,
                    attempt_token=self._attempt_token,
                    wait_for_final_checkpoint=self.config.checkpoints.after_tasks_finish,
                )
            )

    async def _drive(self, lost: asyncio.Future[str]) -> NoReturn:
        while True:
            event: asyncio.Future[Any] = asyncio.ensure_future(self._events.get())
            progressed = asyncio.ensure_future(self._progressed.wait())
            waiting: set[asyncio.Future[Any]] = {event, lost, progressed}
            try:
                done, _ = await asyncio.wait(waiting, timeout=TICK_S, return_when=asyncio.FIRST_COMPLETED)
            finally:
                progressed.cancel()
                if not event.done():
                    event.cancel()
            if lost in done:
                raise AttemptEnded(AttemptFailed(lost.result()))
            if event in done:
                raise AttemptEnded(event.result())
            self._progressed.clear()
            self.checkpoints.check_timeouts()
            progress = self._tasks.progress(bool(self.checkpoints.pending), self.checkpoints.last_completion)
            self.finishing.tick(time.monotonic(), progress)

    def _trigger(
        self, kind: CheckpointKind, target_dir: str | None = None, stop_mode: StopMode | None = None
    ) -> asyncio.Future[CheckpointMetadata]:
        """Raises CheckpointDeclined; else the future of the `_metadata` (`finishing.Trigger`)."""
        pending = self.checkpoints.trigger(kind, target_dir, stop_mode)
        assert pending.done is not None
        pending.done.add_done_callback(self._checkpoint_settled)
        return pending.done

    def _checkpoint_settled(self, done: asyncio.Future[CheckpointMetadata]) -> None:
        # A completed checkpoint may be all that held back the final checkpoint or the stop's savepoint:
        # that step is taken at once. A failed one is tried again at the tick, as before: a store that
        # fails at once must not be asked again and again in a loop.
        if not done.cancelled() and done.exception() is None and self.finishing.held_by_pending:
            self._progressed.set()

    async def _end_attempt(self, event: AttemptEvent, ends_for_good: bool = False) -> None:
        graceful = isinstance(event, TasksFinished)
        if graceful:
            # Every task has closed: a checkpoint whose acknowledgements are all in (the stop's
            # savepoint, when the input ran out as it was asked for) completes; the attempt ending
            # now would discard that savepoint for nothing.
            await self.checkpoints.settle(warn_every_s=self.config.checkpoints.timeout_s)
        self.checkpoints.abort_all("the job attempt ended")
        # A checkpoint whose metadata is being written completes (and is then the one to restore);
        # failed ones are being deleted. The next attempt picks from storage once both are done,
        # however long that takes: it must not choose while a _metadata may still land.
        await self.checkpoints.settle(warn_every_s=self.config.checkpoints.timeout_s)
        await self._control.close_links(self._job_end_notice() if ends_for_good else None)
        # TaskManagers told of the job's end release their sinks' transactions before they exit.
        await self.host.stop(grace_s=5.0 if graceful or ends_for_good else 0.0)
        self.finishing.attempt_ended(isinstance(event, TasksFinished), stop_failure(event))

    def _job_end_notice(self) -> JobEnd:
        cc = self.checkpoints
        latest = cc.latest.checkpoint_id if cc.latest is not None else 0
        savepoints = [
            r.checkpoint_id
            for r in cc.history
            if r.kind == CheckpointKind.SAVEPOINT and r.status == CheckpointStatus.COMPLETED
        ]
        return JobEnd(latest, tuple(savepoints))

    # -- messages from TaskManagers -------------------------------------------------------------------

    def _send(self, message: Message, subtasks: list[SubtaskId] | None) -> None:
        if subtasks is None:
            self._control.broadcast(message)
            return
        targets = {self.placement[s] for s in subtasks}
        for index in targets:
            link = self._control.links.get(index)
            if link is not None:
                link.send(message)

    def _on_message(self, link: TaskManagerLink, message: Report) -> None:
        if isinstance(message, TaskReport):
            self._on_task_state(message)
        elif isinstance(message, Acknowledgement):
            self.checkpoints.on_ack(message)
        elif isinstance(message, Decline):
            self.checkpoints.on_decline(message)
        elif isinstance(message, MetricsReport):
            self.metrics.update(message.metrics)

    def _on_task_state(self, message: TaskReport) -> None:
        subtask = (message.vertex, message.subtask)
        state = message.state
        self._tasks.report(subtask, state, message.drain)
        name = f"{self.graph.vertex(subtask[0]).name}[{subtask[1]}]"
        if state == SubtaskState.FAILED:
            if self._failing is not None:
                # A consequence, not a cause: a lost TaskManager breaks its peers' data connections,
                # and their tasks report that after the loss already failed the attempt.
                log.warning(
                    "task %s failed after the attempt did (%s): %s", name, self._failing, message.error
                )
            else:
                self._failures.task_failed(name, message.error, message.trace)
            reason = f"task {name} failed: {message.error}"
            # The store failed under a TaskManager's restore: as when the coordinator cannot read the
            # checkpoint, restarts retry it and, once they are used up, the job suspends.
            self._fail_attempt(reason, RestoreFailed(reason) if message.storage else None)
        elif state in (SubtaskState.END_OF_DATA, SubtaskState.FINISHED):
            self._progressed.set()
        if state == SubtaskState.FINISHED:
            self.checkpoints.on_task_finished(subtask, drained=self._tasks.drained(subtask))
            if self._tasks.all(SubtaskState.FINISHED):
                self._events.put_nowait(TasksFinished())

    def _on_lost(self, link: TaskManagerLink, attempt: int) -> None:
        if (
            attempt == self.attempt
            and self.state in (JobState.RUNNING, JobState.CREATED, JobState.RESTARTING)
            and not self._tasks.all(SubtaskState.FINISHED)
        ):
            lost = link.lost_reason or f"lost the connection to TaskManager {link.index} (pid {link.pid})"
            self._fail_attempt(lost)

    def _fail_attempt(self, reason: str, failure: AttemptFailed | None = None) -> None:
        if self._failing is None:
            self._failing = reason
        self._events.put_nowait(failure or AttemptFailed(reason))

    # -- operations ---------------------------------------------------------------------------------

    def cancel(self) -> None:
        """Ends the job for good: CANCELED, with a stored result."""
        self._request_end(EndRequested(JobState.CANCELED, "canceled by request"))

    def suspend(self, reason: str) -> None:
        """Stops this coordinator without ending the job: SUSPENDED, resumable with the same job id."""
        self._request_end(EndRequested(JobState.SUSPENDED, reason))

    def _request_end(self, request: EndRequested) -> None:
        if self._end_request is None:
            self._end_request = request
            self._end_requested.set()
            self._events.put_nowait(request)

    # -- for the REST API and progress ------------------------------------------------------------------

    @property
    def control_address(self) -> str:
        """HOST:PORT of the control port TaskManagers register at (empty until the job runs)."""
        return self._control.address

    def taskmanager_links(self) -> list[TaskManagerLink]:
        return sorted(self._control.links.values(), key=lambda link: link.index)
