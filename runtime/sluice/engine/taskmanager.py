"""A TaskManager: one process, one asyncio event loop, the subtasks the coordinator deployed to it.

It registers with the coordinator over the control connection, receives its subtasks and the address
of every other TaskManager, wires local and remote channels, runs the subtasks, relays checkpoint
messages to them and reports their states and metrics back. It exits when told to, and also when the
control connection breaks: without a coordinator a TaskManager has nothing to do.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import traceback

import cloudpickle

from sluice._states import SubtaskState
from sluice.checkpoint.read_failures import is_storage_read_failure
from sluice.checkpoint.restore import Share, restored_share
from sluice.checkpoint.storage import read_pinned_metadata
from sluice.engine._collector import tune_for_records
from sluice.engine._pulse import Pulse
from sluice.engine.chain import OperatorChain
from sluice.engine.channels import InputChannel, InputGate, LocalOutputChannel, OutputChannel
from sluice.engine.context import Metrics
from sluice.engine.network import DataServer, RemoteOutputChannel
from sluice.engine.operators.sink import TwoPhaseCommitSinkOperator
from sluice.engine.operators.source import SourceOperator
from sluice.engine.task import StreamTask, TaskMessage
from sluice.engine.wiring import SubtaskId, channel_index, input_channels, output_targets
from sluice.engine.writer import RecordWriter
from sluice.graph.jobgraph import JobGraph
from sluice.transport import messages
from sluice.transport.framing import frame, read_payload
from sluice.transport.handshake import CONTROL
from sluice.transport.messages import (
    TO_TASKMANAGER,
    Figures,
    JobEnd,
    Message,
    MessageError,
    MetricsReport,
    Register,
    Shutdown,
    TaskReport,
    decode_blob,
    decode_message,
    encode_message,
)
from sluice.transport.secret import LaunchSettingsError, TaskManagerLaunch
from sluice.transport.wire import Wire

log = logging.getLogger(__name__)


class _NotDeployed(Exception):
    """This TaskManager could not set up its part of an attempt, and has reported why."""


HEARTBEAT_SECONDS = 0.5


class TaskManager:
    def __init__(self, launch: TaskManagerLaunch, index: int, bind_host: str) -> None:
        host, _, port = launch.coordinator.rpartition(":")
        self.coordinator_host, self.coordinator_port = host, int(port)
        self.index = index
        self.bind_host = bind_host
        self.wire = Wire.from_launch(launch)
        self.data = DataServer(self.wire)
        self.tasks: dict[SubtaskId, StreamTask] = {}
        self.metrics: dict[SubtaskId, Metrics] = {}
        self._runners: list[asyncio.Task[None]] = []
        self._writer: asyncio.StreamWriter | None = None

    def report(self, message: Message) -> None:
        if self._writer is not None and not self._writer.is_closing():
            if isinstance(message, TaskReport) and message.state == SubtaskState.FINISHED:
                self._send_final_figures((message.vertex, message.subtask))
            self._send(message)

    def _send_final_figures(self, subtask: SubtaskId) -> None:
        # Ahead of the subtask's end: the heartbeat's figures are up to half a second old, and the
        # coordinator keeps the last ones it got for GET /v1/job and the run's summary.
        if subtask in self.metrics:
            self._send(MetricsReport(self.index, {f"{subtask[0]}:{subtask[1]}": self._figures(subtask)}))

    def _send(self, message: Message) -> None:
        assert self._writer is not None
        self._writer.write(frame(encode_message(message), self.wire.max_frame_bytes))

    async def run(self) -> int:
        await self.data.start(self.bind_host)
        reader, self._writer = await self.wire.open(self.coordinator_host, self.coordinator_port, CONTROL)
        advertised = (
            self.bind_host
            if self.bind_host not in ("0.0.0.0", "")
            else socket.gethostbyname(socket.gethostname())
        )
        self.report(Register(self.index, advertised, self.data.port, os.getpid()))
        pulse = Pulse(
            self.wire,
            self.coordinator_host,
            self.coordinator_port,
            tm=self.index,
            pid=os.getpid(),
            data_port=self.data.port,
            interval_s=HEARTBEAT_SECONDS,
        )
        pulse.start()
        heartbeat = asyncio.create_task(self._heartbeat())
        try:
            while True:
                payload = await read_payload(reader, self.wire.max_frame_bytes)
                message = decode_message(payload, TO_TASKMANAGER)
                if isinstance(message, Shutdown):
                    if message.job_ended is not None:
                        self._release_at_job_end(message.job_ended)
                    return 0
                await self._handle(message)
        except MessageError as err:
            log.error("TaskManager %d: a malformed control message from the coordinator: %s", self.index, err)
            return 1
        except (asyncio.IncompleteReadError, ConnectionError):
            return 1
        finally:
            pulse.stop()
            heartbeat.cancel()
            for runner in self._runners:
                runner.cancel()
            await self.data.close()
            with contextlib.suppress(Exception):
                await self._writer.drain()
                self._writer.close()

    def _release_at_job_end(self, ended: JobEnd) -> None:
        """The job ended for good (canceled, or failed with no restart left): sinks release what they
        pre-committed for checkpoints that never completed, since no restore will."""
        latest, kept = ended.latest_checkpoint, frozenset(ended.savepoints)
        for task in self.tasks.values():
            for op in task.chain.operators:
                if isinstance(op, TwoPhaseCommitSinkOperator):
                    try:
                        op.release_at_job_end(latest, kept)
                    except Exception:
                        log.exception(
                            "TaskManager %d: sink %s could not release its transactions", self.index, op.uid
                        )

    def close_sinks(self) -> None:
        """This TaskManager has ended and its event loop with it: exactly-once sinks let go of their
        clients. A TaskManager process would lose them on exit; a thread of a longer-lived process
        (sluice.testing, a reused Spark Python worker) keeps them otherwise."""
        for task in self.tasks.values():
            for op in task.chain.operators:
                if isinstance(op, TwoPhaseCommitSinkOperator):
                    try:
                        op.sink.close()
                    except Exception:
                        log.exception("TaskManager %d: sink %s could not close", self.index, op.uid)

    def _figures(self, subtask: SubtaskId) -> Figures:
        return dict(self.metrics[subtask].as_dict())

    async def _heartbeat(self) -> None:
        # The metrics report; liveness is the Pulse thread's, which a busy event loop cannot delay.
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            figures: dict[str, Figures] = {f"{v}:{s}": self._figures((v, s)) for v, s in self.metrics}
            self.report(MetricsReport(self.index, figures))
            if self._writer is not None:
                with contextlib.suppress(ConnectionError):
                    await self._writer.drain()

    async def _handle(self, message: messages.Deploy | TaskMessage) -> None:
        if isinstance(message, messages.Deploy):
            with contextlib.suppress(_NotDeployed):
                await self._deploy(message)
            return
        for task in self._addressees(message):
            task.post(message)

    def _addressees(self, message: TaskMessage) -> list[StreamTask]:
        """The subtasks here a checkpoint or stop message is for."""
        if isinstance(message, messages.Trigger):
            return [task for key in message.tasks if (task := self.tasks.get(key)) is not None]
        if isinstance(message, messages.Stop):  # sources stop; the end of data flows downstream from them
            return [task for task in self.tasks.values() if isinstance(task.chain.head, SourceOperator)]
        return list(self.tasks.values())

    async def _deploy(self, message: messages.Deploy) -> None:
        # The graph holds the user's functions, so it is a pickle; it comes from the coordinator, which
        # proved it holds the job's secret before this connection carried anything.
        graph: JobGraph = cloudpickle.loads(decode_blob(message.graph))
        attempt, job_id = message.attempt, message.job_id
        mine = list(message.tasks)
        where, addresses = message.placement, message.taskmanagers
        shares = await self._restore(message, graph, mine)
        gates: dict[SubtaskId, list[InputChannel]] = {}
        for v, s in mine:
            vertex = graph.vertex(v)
            layout = input_channels(graph, vertex, s)
            channels = [InputChannel(i, edge.input_index) for i, (edge, _) in enumerate(layout)]
            gates[(v, s)] = channels
            for i, (edge, up) in enumerate(layout):
                if where[(edge.source, up)] != self.index:
                    self.data.register((attempt, v, s, i), channels[i])
        for v, s in mine:
            vertex = graph.vertex(v)
            writers = []
            for edge in vertex.outputs:
                outs: list[OutputChannel] = []
                for target in output_targets(graph, edge, s):
                    ch = channel_index(graph, edge, s)
                    if where[(edge.target, target)] == self.index:
                        outs.append(LocalOutputChannel(gates[(edge.target, target)][ch]))
                    else:
                        host, port = addresses[where[(edge.target, target)]]
                        key = (attempt, edge.target, target, ch)
                        outs.append(RemoteOutputChannel(host, port, key, self.wire))
                writers.append(RecordWriter(edge.partitioning, outs, graph.max_parallelism))
            metrics = self.metrics[(v, s)] = Metrics()
            chain = OperatorChain(
                vertex, s, attempt, job_id, writers, metrics, shares[(v, s)], message.attempt_token
            )
            layout = input_channels(graph, vertex, s)
            gate = InputGate(gates[(v, s)]) if layout else None
            rate = None
            if isinstance(chain.head, SourceOperator):
                limit = chain.head.source.records_per_second()
                rate = None if limit is None else limit / vertex.parallelism
            task = StreamTask(
                chain,
                s,
                gate,
                [e.input_index for e, _ in layout],
                self.report,
                metrics,
                rate,
                wait_for_final_checkpoint=message.wait_for_final_checkpoint,
            )
            self.tasks[(v, s)] = task
        for task in self.tasks.values():
            self._runners.append(asyncio.create_task(task.run()))

    async def _restore(
        self, message: messages.Deploy, graph: JobGraph, mine: list[SubtaskId]
    ) -> dict[SubtaskId, dict[str, Share]]:
        """The state each subtask here restores; raises _NotDeployed when reading it failed (reported)."""
        try:
            return await asyncio.to_thread(
                self._restore_shares, graph, mine, message.restore, message.restore_digest
            )
        except Exception as err:
            # Nothing of this attempt runs here. Said as the failure of a subtask, so the coordinator
            # learns why (and suspends the job when it was the store that failed), not as a lost TaskManager.
            if mine:
                self.report(
                    TaskReport(
                        *mine[0],
                        SubtaskState.FAILED,
                        f"restoring {message.restore} failed: {type(err).__name__}: {err}",
                        traceback.format_exc(),
                        storage=is_storage_read_failure(err) or None,
                    )
                )
            raise _NotDeployed from err

    @staticmethod
    def _restore_shares(
        graph: JobGraph, mine: list[SubtaskId], restore: str | None, digest: str | None
    ) -> dict[SubtaskId, dict[str, Share]]:
        shares: dict[SubtaskId, dict[str, Share]] = {(v, s): {} for v, s in mine}
        if restore is None:
            return shares
        if digest is None:
            raise ValueError(
                f"the coordinator named {restore} to restore without the digest of its _metadata"
            )
        metadata = read_pinned_metadata(restore, digest)
        for v, s in mine:
            vertex = graph.vertex(v)
            for op in vertex.operators:
                shares[(v, s)][op.uid] = restored_share(
                    metadata, op.uid, s, vertex.parallelism, vertex.max_parallelism
                )
        return shares


def run_taskmanager(launch: TaskManagerLaunch, index: int, bind_host: str = "127.0.0.1") -> int:
    taskmanager = TaskManager(launch, index, bind_host)
    try:
        return asyncio.run(taskmanager.run())
    finally:
        taskmanager.close_sinks()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m sluice.engine.taskmanager",
        description="A TaskManager process. Its launch settings (the coordinator's address and the job's "
        "secret) are read as one JSON line from standard input, never from the command line.",
    )
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--bind-host", default="127.0.0.1")
    args = parser.parse_args(argv)
    # Ctrl-C in a terminal signals the whole process group, this child of `sluice run` too. Ending the
    # job is the coordinator's to do (it cancels and stops its TaskManagers); dying here first would only
    # print a KeyboardInterrupt traceback per TaskManager and fail the attempt under the cancel.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    line = sys.stdin.readline()
    if not line:
        # The pipe closed with nothing in it: the coordinator ended before it needed this TaskManager
        # (`ProcessHost.start_early`). There is nothing to do.
        sys.exit(0)
    try:
        launch = TaskManagerLaunch.decode(line)
    except LaunchSettingsError as err:
        sys.exit(f"sluice TaskManager: {err} (its launch settings come from the coordinator that starts it)")
    tune_for_records()
    profile_dir = os.environ.get("SLUICE_PROFILE_DIR")
    if profile_dir:
        # Developer aid: one cProfile dump per TaskManager, for `python -m pstats`.
        import cProfile

        profiler = cProfile.Profile()
        code = profiler.runcall(run_taskmanager, launch, args.index, args.bind_host)
        profiler.dump_stats(os.path.join(profile_dir, f"taskmanager-{args.index}.pstats"))
        sys.exit(code)
    sys.exit(run_taskmanager(launch, args.index, args.bind_host))


if __name__ == "__main__":
    main()
