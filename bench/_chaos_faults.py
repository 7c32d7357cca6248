"""Striking one fault of a chaos scenario at its moment.

`strike` returns whether the fault was injected: a fault whose moment never comes (the job ended first)
is not counted. Every wait here is bounded by the run's deadline.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from typing import TYPE_CHECKING, Any

from _chaos_scenario import (
    COORDINATOR_KILL,
    POSTGRES_RESTART,
    S3_FAULT,
    SAVEPOINT,
    STOP_RESUME,
    TM_KILL,
    TM_STOP,
    Fault,
)
from testkit.jobs import run_cli

if TYPE_CHECKING:
    from _chaos_run import ChaosRun


def _running(run: ChaosRun) -> bool:
    return run.job.process.poll() is None


def _sleep(run: ChaosRun, seconds: float, deadline: float) -> bool:
    """Sleeps while the job runs; False once it has ended (or the deadline passed)."""
    end = min(time.monotonic() + seconds, deadline)
    while time.monotonic() < end:
        if not _running(run):
            return False
        time.sleep(0.02)
    return _running(run)


def _quiet(call: Any, default: Any) -> Any:
    # The REST API is down between a coordinator's death and the next one's start, and a GET may
    # meet a coordinator just exiting: that is no reason to stop the run.
    try:
        return call()
    except (OSError, AssertionError, ValueError, KeyError):
        return default


def _completed(run: ChaosRun) -> int:
    return int(_quiet(run.job.completed_checkpoints, -1))


def _wait_moment(run: ChaosRun, fault: Fault, deadline: float) -> bool:
    # A job that has not started its TaskManagers yet has nothing to hit: wait for them first.
    while not _quiet(run.job.taskmanager_pids, []):
        if not _sleep(run, 0.05, deadline):
            return False
    if not _sleep(run, fault.delay_s, deadline):
        return False
    if fault.moment == "end":
        while time.monotonic() < deadline and _running(run):
            if _quiet(lambda: run.job.get("/v1/job")["subtasks"]["finished"], 0) > 0:
                run.log("a subtask finished: the job is ending")
                return True
            time.sleep(0.02)
        return False
    if fault.moment != "after-checkpoint":
        return True
    base = _completed(run)
    # Strike as soon as the count rises: every TaskManager acknowledged, the sinks are committing.
    while time.monotonic() < deadline and _running(run):
        now = _completed(run)
        if now > base >= 0:
            run.log(f"checkpoint count rose {base} -> {now}")
            return True
        base = now if base < 0 else base
        time.sleep(0.01)
    return False


def _victim(run: ChaosRun, fault: Fault) -> int | None:
    pids = _quiet(run.job.taskmanager_pids, [])
    return pids[fault.victim % len(pids)] if pids else None


def _proxy_fault(run: ChaosRun, mode: str) -> None:
    if run.proxy is not None and mode and mode != "pass":
        run.proxy.set_mode(mode)
        run.log(f"S3 proxy: {mode}")


def _proxy_pass(run: ChaosRun) -> None:
    if run.proxy is not None and run.proxy.mode != "pass":
        run.proxy.set_mode("pass")
        run.log("S3 proxy: pass")


def strike(run: ChaosRun, fault: Fault, deadline: float) -> bool:
    if not _wait_moment(run, fault, deadline):
        run.log(f"not struck (the job ended first): {fault.describe()}")
        return False
    if fault.kind in (TM_KILL, TM_STOP):
        return _signal_taskmanager(run, fault)
    if fault.kind == COORDINATOR_KILL:
        run.log(f"SIGKILL coordinator pid {run.job.process.pid}")
        run.kill_coordinator()
        run.start()
        return True
    if fault.kind == POSTGRES_RESTART:
        run.log("PostgreSQL restart -m immediate")
        run.services.restart_postgres()
        run.log("PostgreSQL back")
        return True
    if fault.kind == S3_FAULT:
        _proxy_fault(run, fault.mode)
        try:
            _sleep(run, fault.hold_s, deadline)
        finally:
            _proxy_pass(run)
        return True
    if fault.kind == SAVEPOINT:
        return _savepoint(run, fault, deadline)
    if fault.kind == STOP_RESUME:
        return _stop_and_resume(run, fault)
    raise ValueError(f"unknown fault {fault.kind}")


def _signal_taskmanager(run: ChaosRun, fault: Fault) -> bool:
    from _chaos_run import send

    pid = _victim(run, fault)
    if pid is None:
        run.log(f"not struck (no TaskManager listed): {fault.describe()}")
        return False
    if fault.kind == TM_KILL:
        run.log(f"SIGKILL TaskManager pid {pid}")
        return send(pid, signal.SIGKILL)
    run.log(f"SIGSTOP TaskManager pid {pid} for {fault.hold_s:.1f}s")
    if not send(pid, signal.SIGSTOP):
        return False
    time.sleep(fault.hold_s)
    # Let it run again: it must find its attempt gone and exit, never write for it.
    send(pid, signal.SIGCONT)
    run.log(f"SIGCONT TaskManager pid {pid}")
    return True


def _savepoint(run: ChaosRun, fault: Fault, deadline: float) -> bool:
    _proxy_fault(run, fault.mode)
    try:
        answer = run.job.post("/v1/savepoints", {"targetDirectory": run.sink.savepoint_dir})
        trigger = answer["triggerId"]
        run.log(f"savepoint {trigger} requested")
        if fault.hold_s:
            _sleep(run, fault.hold_s, deadline)
        _proxy_pass(run)
        entry: dict[str, Any] = {"status": "IN_PROGRESS"}
        limit = min(deadline, time.monotonic() + 90)
        while entry.get("status") == "IN_PROGRESS" and time.monotonic() < limit and _running(run):
            entry = _quiet(lambda: run.job.get(f"/v1/savepoints/{trigger}"), entry)
            time.sleep(0.1)
        run.log(f"savepoint {trigger}: {entry.get('status')} {entry.get('path') or entry.get('error') or ''}")
    except OSError as err:  # a job that just ended, or a 409 (another savepoint, not RUNNING)
        run.log(f"savepoint request failed: {err}")
    finally:
        _proxy_pass(run)
    return True


_STOPPED = re.compile(r"job \S+ FINISHED; savepoint (\S+)")


def _stopped_anyway(run: ChaosRun) -> str | None:
    """The savepoint of a job that ended FINISHED with one although its stop was reported failed."""
    # A stop refused up front (the job is restarting, say) leaves it running: do not wait long.
    limit = time.monotonic() + 5
    while _running(run) and time.monotonic() < limit:
        time.sleep(0.1)
    if _running(run) or run.job.wait(5) != 0:
        return None
    found = [m.group(1) for line in run.job.stderr_lines if (m := _STOPPED.search(line))]
    return found[-1] if found else None


def _stop_and_resume(run: ChaosRun, fault: Fault) -> bool:
    """`sluice stop` (SUSPEND: no drain, windows kept in the savepoint), then `sluice run
    --from-savepoint` under a new job id; a failed stop leaves the job running, as it should."""
    url = run.job.rest_url()
    _proxy_fault(run, fault.mode)
    # An S3 outage starts before the stop and ends while the stop runs.
    timer = threading.Timer(fault.hold_s, _proxy_pass, [run]) if fault.hold_s else None
    try:
        if timer is not None:
            timer.start()
        run.log("sluice stop (suspend)")
        stop = run_cli("stop", "--address", url, "--savepoint-dir", run.sink.savepoint_dir, timeout=150)
    finally:
        if timer is not None:
            timer.join()
        _proxy_pass(run)
    if stop.returncode != 0:
        run.log(f"sluice stop failed ({stop.returncode}): {stop.stderr.strip()[-300:]}")
        path = _stopped_anyway(run)
        if path is None:
            return True  # the job runs on (or ended for another reason): nothing to resume
        # The caller was told the stop failed while the job did stop with a savepoint: a bug to
        # report; resuming from that savepoint still lets the run check the data path.
        run.result.anomalies.append(f"`sluice stop` failed but the job stopped with savepoint {path}")
        run.log(f"the job stopped anyway, with savepoint {path}")
    else:
        path = stop.stdout.strip().splitlines()[-1]
        code = run.job.wait(60)
        run.log(f"stopped with savepoint {path}; coordinator exited {code}")
    run.resumes += 1
    run.job_id = f"{run.scenario.job_id}-r{run.resumes}"
    run.from_savepoint = path
    run.start()
    return True
