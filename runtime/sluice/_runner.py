"""`sluice run`: builds the job, runs the coordinator in this process and prints progress."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
import time
import uuid
from collections.abc import Callable

from sluice._fs import join, normalize
from sluice._pipeline import PipelineError, build_graph
from sluice.api.environment import StreamEnvironment
from sluice.checkpoint.coordinator import CheckpointConfig
from sluice.checkpoint.storage import CheckpointStorage
from sluice.coordinator.jobmaster import JobConfig, JobMaster
from sluice.coordinator.rest import RestApi
from sluice.coordinator.restart import RestartStrategy
from sluice.coordinator.result_store import read_result
from sluice.coordinator.validation import RestoreRefused
from sluice.graph.jobgraph import GraphError, JobGraph
from sluice.hosts.base import HostSetupError
from sluice.hosts.selection import make_host

EXIT_FINISHED, EXIT_FAILED, EXIT_USAGE, EXIT_SUSPENDED = 0, 1, 2, 3


class UsageError(Exception):
    """A pipeline or arguments `sluice run` cannot use; the message says what is wrong."""


def _say(message: str) -> None:
    print(f"sluice: {message}", file=sys.stderr, flush=True)


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
    checkpoint_dir = args.checkpoint_dir
    if checkpoint_dir is None:
        checkpoint_dir = default_checkpoint_dir
        say(f"no --checkpoint-dir given: checkpoints go to {normalize(checkpoint_dir)}")
    config = JobConfig(
        checkpoint_dir=checkpoint_dir,
        job_id=args.job_id or uuid.uuid4().hex,
        checkpoints=CheckpointConfig(
            interval_s=args.checkpoint_interval if args.checkpoint_interval is not None else 10.0,
            timeout_s=args.checkpoint_timeout,
            min_pause_s=args.min_pause,
            retained=args.checkpoints_retained,
            after_tasks_finish=not args.no_checkpoints_after_tasks_finish,
        ),
        taskmanagers=args.taskmanagers or args.parallelism,
        restart=RestartStrategy(args.restart_strategy, args.max_restarts, args.restart_delay),
        from_savepoint=args.from_savepoint,
        allow_non_restored_state=args.allow_non_restored_state,
        savepoint_dir=args.savepoint_dir,
    )
    return graph, config


def exit_code(state: str) -> int:
    if state == "SUSPENDED":
        return EXIT_SUSPENDED
    return EXIT_FINISHED if state == "FINISHED" else EXIT_FAILED


def run_command(args: argparse.Namespace, default_checkpoint_dir: str) -> int:
    started = time.monotonic()
    logging.basicConfig(level=logging.WARNING, format="sluice: %(levelname)s %(name)s: %(message)s")
    try:
        graph, config = job_from_args(args, default_checkpoint_dir)
        # A coordinator started again for a job that has ended (its pod restarted, say) must not run it a
        # second time, nor start a Spark driver just to find that out.
        ended = read_result(CheckpointStorage(config.checkpoint_dir, config.job_id).job_dir)
        if ended is not None:
            _say(
                f"job {config.job_id} already ended {ended['state']} (its job-result.json is in the "
                "checkpoint directory): not running it again"
            )
            return exit_code(str(ended["state"]))
        hosting = make_host(args, config.taskmanagers, config.job_id, graph.name, _say)
    except (UsageError, HostSetupError) as err:
        _say(f"error: {err}")
        return EXIT_USAGE
    job = JobMaster(graph, config, hosting.host)
    try:
        result = asyncio.run(_run(job, args, started))
    except (RestoreRefused, FileNotFoundError) as err:
        _say(f"error: {err}")
        return EXIT_USAGE
    finally:
        hosting.close()
    state = result["state"]
    if state == "FINISHED":
        savepoint = result.get("lastSavepoint")
        _say(f"job {config.job_id} FINISHED" + (f"; savepoint {savepoint}" if savepoint else ""))
    elif state == "SUSPENDED":
        _say(
            f"job {config.job_id} SUSPENDED ({result.get('error')}): it has not ended; `sluice run` with "
            f"--job-id {config.job_id} and the same --checkpoint-dir resumes it from its latest checkpoint"
        )
    else:
        _say(f"job {config.job_id} {state}: {result.get('error') or job.error}")
    return exit_code(str(state))


async def serve_job(
    job: JobMaster, rest_host: str, rest_port: int, on_rest_url: Callable[[str], None]
) -> dict[str, object]:
    """Runs the job with its REST API (unless `rest_port` < 0) until the job ends; returns its result."""
    rest = RestApi(job)
    if rest_port >= 0:
        on_rest_url(await rest.start(rest_host, rest_port))
    try:
        return await job.run()
    finally:
        # A stop-with-savepoint caller is still polling for the savepoint's path: answer it first.
        await rest.linger(limit_s=10.0)
        await rest.stop()


async def _run(job: JobMaster, args: argparse.Namespace, started: float) -> dict[str, object]:
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
        _say(checkpoints)

    if args.rest_port < 0:
        _say(checkpoints)
    try:
        return await serve_job(job, args.rest_host, args.rest_port, announce)
    finally:
        if progress is not None:
            progress.cancel()


async def _progress(job: JobMaster, started: float) -> None:
    # Until the first records arrive, look often: how long a job takes to get going is worth knowing
    # (a cold Spark JVM takes seconds), and the first progress line says it.
    while job.totals()["recordsIn"] == 0 and not job.ended.is_set():
        await asyncio.sleep(0.1)
    if job.totals()["recordsIn"]:
        _say(f"first records processed {time.monotonic() - started:.1f}s after start")
    while True:
        await asyncio.sleep(2)
        view = job.as_json()
        # Records read are what the sources emitted; records written are what the sinks took in.
        read = sum(v["metrics"]["recordsIn"] for v in view["vertices"] if job.graph.vertex(v["id"]).is_source)
        written = sum(
            v["metrics"]["recordsOut"] for v in view["vertices"] if not job.graph.vertex(v["id"]).outputs
        )
        checkpoints, subtasks = view["checkpoints"], view["subtasks"]
        _say(
            f"{time.monotonic() - started:6.1f}s {job.state:<10} "
            f"records read {read:,}, written {written:,} | "
            f"checkpoints {checkpoints['completed']} completed, {checkpoints['failed']} failed | "
            f"subtasks {subtasks['finished']}/{subtasks['total']} finished"
        )
