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

from sluice._fs import join, normalize
from sluice._pipeline import PipelineError, build_graph
from sluice.api.environment import StreamEnvironment
from sluice.checkpoint.coordinator import CheckpointConfig
from sluice.coordinator.jobmaster import JobConfig, JobMaster
from sluice.coordinator.rest import RestApi
from sluice.coordinator.restart import RestartStrategy
from sluice.coordinator.validation import RestoreRefused
from sluice.graph.jobgraph import GraphError
from sluice.hosts.base import TaskManagerHost
from sluice.hosts.processes import ProcessHost

EXIT_FINISHED, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _say(message: str) -> None:
    print(f"sluice: {message}", file=sys.stderr, flush=True)


def run_command(args: argparse.Namespace, default_checkpoint_dir: str) -> int:
    logging.basicConfig(level=logging.WARNING, format="sluice: %(levelname)s %(name)s: %(message)s")
    env = StreamEnvironment(
        dict(args.arg), parallelism=args.parallelism, max_parallelism=args.max_parallelism
    )
    try:
        graph = build_graph(args.pipeline, env)
    except (PipelineError, GraphError) as err:
        _say(f"error: {err}")
        return EXIT_USAGE
    checkpoint_dir = args.checkpoint_dir
    if checkpoint_dir is None:
        checkpoint_dir = default_checkpoint_dir
        _say(f"no --checkpoint-dir given: checkpoints go to {normalize(checkpoint_dir)}")
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
    host: TaskManagerHost = ProcessHost()
    try:
        result = asyncio.run(_run(graph_job := JobMaster(graph, config, host), args))
    except (RestoreRefused, FileNotFoundError) as err:
        _say(f"error: {err}")
        return EXIT_USAGE
    state = result["state"]
    if state == "FINISHED":
        savepoint = result.get("lastSavepoint")
        _say(f"job {config.job_id} FINISHED" + (f"; savepoint {savepoint}" if savepoint else ""))
        return EXIT_FINISHED
    _say(f"job {config.job_id} {state}: {result.get('error') or graph_job.error}")
    return EXIT_FAILED


async def _run(job: JobMaster, args: argparse.Namespace) -> dict[str, object]:
    rest = RestApi(job)
    if args.rest_port >= 0:
        url = await rest.start(args.rest_host, args.rest_port)
        _say(f"job {job.config.job_id}: REST API at {url}")
    _say(f"checkpoints of this job: {join(job.storage.checkpoint_dir, job.config.job_id)}")
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, job.cancel)
    progress = None if args.quiet else asyncio.create_task(_progress(job))
    try:
        return await job.run()
    finally:
        if progress is not None:
            progress.cancel()
        await rest.linger(limit_s=10.0)
        await rest.stop()


async def _progress(job: JobMaster) -> None:
    started = time.monotonic()
    while True:
        await asyncio.sleep(2)
        totals = job.totals()
        cc = job.checkpoints
        completed = cc.counts["completed"] if cc else 0
        failed = cc.counts["failed"] if cc else 0
        status = job.as_json()["subtasks"]
        _say(
            f"{time.monotonic() - started:6.1f}s {job.state:<10} records in {totals['recordsIn']:,} "
            f"out {totals['recordsOut']:,} | checkpoints {completed} completed, {failed} failed | "
            f"subtasks {status['finished']}/{status['total']} finished"
        )
