"""`sluice run`: builds the job, runs the coordinator in this process and prints progress."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sluice import _tokens
from sluice._fs import join, normalize
from sluice._json import FormatError
from sluice._pipeline import PipelineError, build_graph
from sluice._preflight import PreflightError, probe_rest_port, probe_writable
from sluice._states import JobState
from sluice._status import duration, rate
from sluice._summary import run_summary
from sluice.api.environment import StreamEnvironment
from sluice.checkpoint.coordinator import CheckpointConfig
from sluice.checkpoint.integrity import IntegrityError
from sluice.checkpoint.state_key import StateKey, StateKeyError, load_state_key
from sluice.checkpoint.storage import job_directory
from sluice.coordinator._rest_auth import RestAuth, is_loopback
from sluice.coordinator._rest_input import SavepointTargets
from sluice.coordinator.jobmaster import JobConfig, JobMaster
from sluice.coordinator.rest import RestApi
from sluice.coordinator.restart import RestartStrategy
from sluice.coordinator.result_store import JobResult, read_result
from sluice.coordinator.validation import RestoreRefused
from sluice.coordinator.views import job_view, sum_metrics
from sluice.graph.jobgraph import GraphError, JobGraph
from sluice.hosts.base import HostSetupError, HostUnavailable
from sluice.hosts.processes import ProcessHost
from sluice.hosts.selection import make_host

EXIT_FINISHED, EXIT_FAILED, EXIT_USAGE, EXIT_SUSPENDED, EXIT_UNAVAILABLE = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 128 + signal.SIGINT  # what a shell reports for a command that SIGINT ended


class UsageError(Exception):
    """A pipeline or arguments `sluice run` cannot use; the message says what is wrong."""


def _say(message: str) -> None:
    print(f"sluice: {message}", file=sys.stderr, flush=True)


def default_savepoint_dir(checkpoint_dir: str) -> str:
    """`<checkpoint-dir>/savepoints`: savepoint directories are named `savepoint-…`, job directories by
    the job id, so they do not meet there."""
    return join(checkpoint_dir, "savepoints")


def job_from_args(
    args: argparse.Namespace, default_checkpoint_dir: str, say: Callable[[str], None] = _say
) -> tuple[JobGraph, JobConfig]:
    """The job graph and configuration that `sluice run` arguments describe."""
    env = StreamEnvironment(
        dict(args.arg), parallelism=args.parallelism, max_parallelism=args.max_parallelism
    )
    try:
        graph = build_graph(args.pipeline, env)
    except (PipelineError, GraphError) as err:
        raise UsageError(str(err)) from err
    graph.use_state_backend(args.state_backend)
    checkpoint_dir = args.checkpoint_dir
    if checkpoint_dir is None:
        checkpoint_dir = default_checkpoint_dir
        say(f"no --checkpoint-dir given: checkpoints go to {normalize(checkpoint_dir)}")
    savepoint_dir = args.savepoint_dir
    if savepoint_dir is None:
        # Beside the checkpoints, as Flink users keep them: `sluice stop` and the dashboard's buttons work
        # without a --savepoint-dir, and the directory is one the REST API already lets savepoints go to.
        if args.job_id == "savepoints":
            raise UsageError(
                "--job-id savepoints would share its directory with the default savepoint directory: "
                "give another job id, or a --savepoint-dir"
            )
        savepoint_dir = default_savepoint_dir(checkpoint_dir)
        say(f"no --savepoint-dir given: savepoints go to {normalize(savepoint_dir)}")
    config = JobConfig(
        checkpoint_dir=checkpoint_dir,
        job_id=args.job_id or uuid.uuid4().hex,
        checkpoints=CheckpointConfig(
            interval_s=args.checkpoint_interval if args.checkpoint_interval is not None else 10.0,
            timeout_s=args.checkpoint_timeout,
            min_pause_s=args.min_pause,
            retained=args.checkpoints_retained,
            after_tasks_finish=not args.no_checkpoints_after_tasks_finish,
            tolerable_failures=args.tolerable_checkpoint_failures,
        ),
        taskmanagers=args.taskmanagers or args.parallelism,
        restart=RestartStrategy(
            args.restart_strategy,
            args.max_restarts,
            args.restart_delay,
            max_delay_s=args.restart_max_delay,
            reset_after_s=args.restart_reset_after,
        ),
        from_savepoint=args.from_savepoint,
        allow_non_restored_state=args.allow_non_restored_state,
        savepoint_dir=savepoint_dir,
        internal_tls=args.internal_tls,
        max_frame_bytes=args.max_frame_size,
        heartbeat_timeout_s=args.heartbeat_timeout,
        state_key=_state_key(args.state_key_file),
        trust_savepoint=args.trust_savepoint,
    )
    return graph, config


def _state_key(path: str | None) -> StateKey:
    try:
        return load_state_key(path)
    except (StateKeyError, OSError) as err:
        raise UsageError(str(err)) from err


@dataclass(frozen=True)
class RestSettings:
    """How the REST API listens and whom it lets do what."""

    host: str
    port: int  # < 0: no REST API
    auth: RestAuth
    targets: SavepointTargets
    token_source: str  # for the start message: where the token came from
    store_token: bool  # a token made here: stored for the CLI of this user, removed at the end
    allowed_hosts: tuple[str, ...] = ()  # host names a request may name besides loopback and the bind host


def rest_settings(args: argparse.Namespace, config: JobConfig) -> RestSettings:
    """The REST settings that `sluice run` arguments (and SLUICE_REST_TOKEN) describe."""
    try:
        if args.rest_token_file:
            token = _tokens.read_token_file(args.rest_token_file)
            source, store = f"from {args.rest_token_file}", False
        elif os.environ.get(_tokens.ENV_VAR, "").strip():
            token = _tokens.checked_token(os.environ[_tokens.ENV_VAR].strip(), f"${_tokens.ENV_VAR}")
            source, store = f"from ${_tokens.ENV_VAR}", False
        else:
            token, store = _tokens.new_token(), True
            source = f"stored in {_tokens.token_path(config.job_id)} (readable by this user only)"
    except ValueError as err:
        raise UsageError(str(err)) from err
    # Off loopback anyone on the network could read the job (its vertices, hosts, paths, errors): reads
    # need the token too unless --rest-auth mutations says otherwise.
    mode = args.rest_auth or ("mutations" if is_loopback(args.rest_host) else "all")
    return RestSettings(
        host=args.rest_host,
        port=args.rest_port,
        auth=RestAuth(token, protect_reads=mode == "all"),
        targets=SavepointTargets([config.savepoint_dir, config.checkpoint_dir, *args.savepoint_dir_allow]),
        token_source=source,
        store_token=store,
        allowed_hosts=tuple(args.rest_allowed_host),
    )


def exit_code(state: str) -> int:
    if state == JobState.SUSPENDED:
        return EXIT_SUSPENDED
    return EXIT_FINISHED if state == JobState.FINISHED else EXIT_FAILED


def run_command(
    args: argparse.Namespace, default_checkpoint_dir: str, process_host: ProcessHost | None = None
) -> int:
    """`sluice run`. `process_host`: a process host whose first TaskManagers were started early."""
    # A shell without job control (a script's `sluice run ... &`) starts a command with SIGINT ignored,
    # and Python keeps an inherited SIG_IGN: a SIGINT before the job's own handler is in place (while
    # Spark starts, say) would be lost. Until then SIGINT interrupts the start, as in a terminal.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    started = time.monotonic()
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="sluice: %(levelname)s %(name)s: %(message)s",
    )
    try:
        graph, config = job_from_args(args, default_checkpoint_dir)
        # A coordinator started again for a job that has ended (its pod restarted, say) must not run it a
        # second time, nor start a Spark driver just to find that out.
        key = config.state_key or load_state_key()
        ended = read_result(job_directory(config.checkpoint_dir, config.job_id), config.job_id, key)
        if ended is not None:
            start_from = (
                f"; a new job (another --job-id) starts from its last retained checkpoint with "
                f"--from-savepoint {ended.last_checkpoint}"
                if ended.last_checkpoint and ended.state != JobState.FINISHED
                else ""
            )
            _say(
                f"job {config.job_id} already ended {ended.state} (its job-result.json is in the "
                f"checkpoint directory): not running it again{start_from}"
            )
            return exit_code(ended.state)
        rest = rest_settings(args, config)
        probe_rest_port(rest.host, rest.port)
        probe_writable(config.checkpoint_dir, "--checkpoint-dir")
        hosting = make_host(args, config.taskmanagers, config.job_id, graph.name, _say, process_host)
    except (UsageError, HostSetupError, PreflightError) as err:
        _say(f"error: {err}")
        return EXIT_USAGE
    except HostUnavailable as err:
        _say(f"error: {err}. Nothing ran and nothing was stored: run it again")
        return EXIT_UNAVAILABLE
    except FormatError as err:
        _say(f"error: {err}; the job ended, but how is unreadable: not running it again")
        return EXIT_USAGE
    except KeyboardInterrupt:
        return _interrupted_before_start()
    try:
        # Inside the try: building the job (pickling the graph, say) takes long enough for a SIGINT.
        job = JobMaster(graph, config, hosting.host)
        job.on_restore = lambda restored: _say(f"job {config.job_id}: {restored.describe()}")
        result = asyncio.run(_run(job, args, rest, started))
    except (RestoreRefused, FileNotFoundError, IntegrityError) as err:
        _say(f"error: {err}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        # Only before _run put its own handler in place: from then on SIGINT cancels the job.
        return _interrupted_before_start()
    finally:
        hosting.close()
    _say(run_summary(graph, job_view(job), time.monotonic() - started))
    failure = job.restore_failure.reason if job.restore_failure is not None else None
    _say(ending(result, restore_failure=failure))
    return exit_code(result.state)


def _interrupted_before_start() -> int:
    _say("interrupted (SIGINT) before the job ran: nothing ran and nothing was stored")
    return EXIT_INTERRUPTED


def ending(result: JobResult, restore_failure: str | None = None) -> str:
    """The last line of `sluice run`: how the job ended, and how to go on from there. `restore_failure`:
    why the job's state could not be restored, when that is what stopped it."""
    job_id, state = result.job_id, result.state
    if state == JobState.FINISHED:
        # Only a savepoint the job stopped with: an older one would replay what came after it.
        savepoint = result.stop_savepoint
        return f"job {job_id} FINISHED" + (f"; savepoint {savepoint}" if savepoint else "")
    resume = (
        f"`sluice run` with --job-id {job_id} and the same --checkpoint-dir resumes it from its latest "
        "checkpoint"
    )
    if state == JobState.SUSPENDED and restore_failure is not None:
        start_from = result.last_savepoint or result.last_checkpoint
        elsewhere = (
            f"; or start a new job from {start_from} with --from-savepoint {start_from} and another --job-id"
            if start_from
            else "; or start a new job from a savepoint with --from-savepoint URI and another --job-id"
        )
        return (
            f"job {job_id} SUSPENDED: its state could not be restored: {restore_failure}. "
            f"The job has not ended (no result was stored): once the storage is repaired, {resume}"
            + elsewhere
        )
    if state == JobState.SUSPENDED:
        return f"job {job_id} SUSPENDED ({result.error}): it has not ended; {resume}"
    cause = result.error or ("canceled by request" if state == JobState.CANCELED else "cause unknown")
    line = f"job {job_id} {state}: {cause}"
    if result.last_checkpoint:
        line += (
            f"; its last retained checkpoint is {result.last_checkpoint} (a new job starts from it with "
            f"--from-savepoint {result.last_checkpoint})"
        )
    return line


async def serve_job(job: JobMaster, rest: RestSettings, on_rest_url: Callable[[str], None]) -> JobResult:
    """Runs the job with its REST API (unless `rest.port` < 0) until the job ends; returns its result."""
    api = RestApi(job, rest.auth, rest.targets, rest.allowed_hosts)
    stored: Path | None = None
    try:
        if rest.port >= 0:
            if rest.store_token:
                # Before the API listens: a client that sees the API can find the token.
                stored = await asyncio.to_thread(_tokens.store_token, job.config.job_id, rest.auth.token)
            on_rest_url(await api.start(rest.host, rest.port))
        try:
            return await job.run()
        finally:
            # A stop-with-savepoint caller is still polling for the savepoint's path: answer it first.
            await api.linger(limit_s=10.0)
            await api.stop()
    finally:
        if stored is not None:
            _tokens.remove_token(job.config.job_id, rest.auth.token)


async def _run(job: JobMaster, args: argparse.Namespace, rest: RestSettings, started: float) -> JobResult:
    loop = asyncio.get_running_loop()
    # Ctrl-C is a user ending the job. SIGTERM is the process being shut down by what runs it (a pod
    # deleted or evicted, a service stopped): the job is suspended, to be resumed by the next coordinator.
    with contextlib.suppress(NotImplementedError):
        loop.add_signal_handler(signal.SIGINT, job.cancel)
        loop.add_signal_handler(signal.SIGTERM, lambda: job.suspend("the coordinator received SIGTERM"))
    progress = None if args.quiet else asyncio.create_task(_progress(job, started))

    checkpoints = f"checkpoints of this job: {join(job.storage.checkpoint_dir, job.config.job_id)}"

    def announce(url: str) -> None:
        _say(f"job {job.config.job_id}: REST API at {url}")
        _say(f"job {job.config.job_id}: dashboard at {url}/")
        reads = "every request but /v1/health" if rest.auth.protect_reads else "requests that change the job"
        _say(f"REST token ({reads} need it): {rest.token_source}")
        _say(checkpoints)

    if rest.port < 0:
        _say(checkpoints)
    try:
        return await serve_job(job, rest, announce)
    finally:
        if progress is not None:
            progress.cancel()


async def _progress(job: JobMaster, started: float) -> None:
    # Until the first records arrive, look often: how long a job takes to get going is worth knowing
    # (a cold Spark JVM takes seconds), and the first progress line says it.
    while sum_metrics(job.metrics.values())["recordsIn"] == 0 and not job.ended.is_set():
        await asyncio.sleep(0.1)
    if sum_metrics(job.metrics.values())["recordsIn"]:
        _say(f"first records processed {time.monotonic() - started:.1f}s after start")
    last: tuple[float, int] | None = None
    while True:
        await asyncio.sleep(2)
        view = job_view(job)
        # Records read are what the sources emitted; records written are what the sinks took in.
        read = sum(v.counts.records_in for v in view.vertices if job.graph.vertex(v.id).is_source)
        written = sum(v.counts.records_out for v in view.vertices if not job.graph.vertex(v.id).outputs)
        now = time.monotonic()
        # Over the last two seconds; a restart starts the counts again, which shows as no rate.
        per_s = (read - last[1]) / (now - last[0]) if last is not None and read >= last[1] else None
        last = (now, read)
        checkpoints, subtasks = view.checkpoints, view.subtasks
        latest = checkpoints.last_completed
        took = f", last took {duration(latest.duration_ms)}" if latest else ""
        _say(
            f"{now - started:6.1f}s {job.state:<10} "
            f"records read {read:,} ({rate(per_s)}), written {written:,} | "
            f"checkpoints {checkpoints.completed} completed{took}, {checkpoints.failed} failed | "
            f"subtasks {subtasks.finished}/{subtasks.total} finished"
        )
