"""One chaos run: start the job, strike its faults at their moments, see it to the end, check the output.

The job is a real `sluice run` subprocess (testkit.jobs.SluiceJob). After a coordinator SIGKILL the
same command runs again with the same --job-id and --checkpoint-dir (it resumes from the latest
checkpoint); after a stop-with-savepoint the job runs again from that savepoint under a new job id.
The output is then compared, as a multiset of rows, with the plain-Python reference.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _chaos_side_outputs as side_outputs
from _chaos_faults import strike
from _chaos_scenario import Scenario
from _chaos_services import Services, alive, descendants, kill_all, wait_gone
from _chaos_sinks import Sink, make_sink
from testkit.checkpoints import GENERATED_COUNTS, PIPELINES
from testkit.jobs import SluiceJob

MAX_COORDINATORS = 8  # coordinator kills, reruns and resumes of one run, all together
ORPHAN_GRACE_S = 15.0  # how long TaskManagers get to notice their coordinator is gone and exit


@dataclass
class RunResult:
    scenario: Scenario
    faults: int = 0
    lost: collections.Counter[str] = field(default_factory=collections.Counter)
    """Rows of the reference missing from the output of a run whose job ended FINISHED."""
    unwritten: collections.Counter[str] = field(default_factory=collections.Counter)
    """Rows missing from a run stopped before its job finished (its time budget ran out, or the
    harness failed): not lost, only not written yet. Such a run is an error, not a loss."""
    duplicated: collections.Counter[str] = field(default_factory=collections.Counter)
    prepared: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    processes: list[str] = field(default_factory=list)
    error: str | None = None
    anomalies: list[str] = field(default_factory=list)
    """Wrong answers of the runtime that are not about the data (a stop reported failed that stopped)."""
    seconds: float = 0.0
    events: list[str] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    stderr_tail: str = ""
    completed: bool = False
    """The job ended FINISHED."""

    @property
    def violated(self) -> bool:
        return bool(self.lost or self.duplicated or self.prepared or self.files or self.processes)

    @property
    def ok(self) -> bool:
        return self.completed and not self.violated and self.error is None and not self.anomalies


class ChaosRun:
    """State of one run; `faults.strike` drives it through `job`, `restart` and `log`."""

    def __init__(self, scenario: Scenario, services: Services, workdir: Path, proxy: Any) -> None:
        self.scenario = scenario
        self.services = services
        self.workdir = workdir
        self.proxy = proxy
        self.result = RunResult(scenario)
        self.sink: Sink = make_sink(scenario, services, workdir, proxy)
        self.jobs: list[SluiceJob] = []
        self.job_id = scenario.job_id
        self.resumes = 0
        self.from_savepoint: str | None = None  # a resumed job's coordinators all start from it
        self.seen: dict[int, int] = {}  # every process any coordinator of this run started
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self._done = threading.Event()

    # --- the job --------------------------------------------------------------------------------

    def options(self) -> list[str]:
        sc = self.scenario
        if sc.pipeline == "side-outputs":
            pipeline = side_outputs.PIPELINE
        else:
            pipeline = PIPELINES / "postgres_counts.py" if sc.sink == "postgres" else GENERATED_COUNTS
        return [
            str(pipeline),
            *self.sink.args(),
            *("--arg", f"count={sc.count}", "--arg", f"rate={sc.rate}", "--arg", f"keys={sc.keys}"),
            *("--parallelism", "2", "--host", sc.host),
            *("--checkpoint-dir", self.sink.checkpoint_dir, "--savepoint-dir", self.sink.savepoint_dir),
            *(
                "--checkpoint-interval",
                f"{sc.interval_ms}ms",
                "--heartbeat-timeout",
                f"{sc.heartbeat_s:.0f}s",
            ),
            *("--restart-strategy", "fixed-delay", "--max-restarts", "40", "--restart-delay", "200ms"),
        ]

    @property
    def job(self) -> SluiceJob:
        return self.jobs[-1]

    def start(self) -> SluiceJob:
        if len(self.jobs) >= MAX_COORDINATORS:
            raise RuntimeError(f"{MAX_COORDINATORS} coordinators started: giving up on this run")
        pipeline, *options = self.options()
        # The latest checkpoint of the job id wins over --from-savepoint: a coordinator run again for a
        # resumed job carries on from its own checkpoints once it has some, else from the savepoint.
        if self.from_savepoint:
            options += ["--from-savepoint", self.from_savepoint]
        job = SluiceJob(pipeline, *options, "--job-id", self.job_id, env=self.sink.env())
        with self._lock:
            self.jobs.append(job)
        self.log(f"coordinator {len(self.jobs)} started (pid {job.process.pid}, job id {self.job_id})")
        return job

    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def log(self, what: str) -> None:
        self.result.events.append(f"{self.elapsed():6.1f}s {what}")

    def _track(self) -> None:
        # Remembers every descendant of every coordinator while it lives: after a coordinator is gone,
        # its orphans can no longer be found through it.
        while not self._done.wait(0.2):
            with self._lock:
                roots = [j.process.pid for j in self.jobs if j.process.poll() is None]
            for root in roots:
                found = descendants(root)
                with self._lock:
                    self.seen.update(found)

    def kill_coordinator(self) -> None:
        """SIGKILL of the coordinator; its TaskManagers must exit by themselves (they lose their
        control connection). Those still running after the grace time are leftovers, then killed."""
        job = self.job
        with self._lock:
            mine = {**self.seen, **descendants(job.process.pid)}
        job.process.send_signal(signal.SIGKILL)
        job.process.wait(30)
        left = wait_gone(mine, ORPHAN_GRACE_S)
        if left:
            self.result.processes += [f"{pid} ({_cmdline(pid)})" for pid in left]
            self.log(f"still running {ORPHAN_GRACE_S:.0f}s after the coordinator died: {sorted(left)}")
            kill_all(left)

    # --- the run ----------------------------------------------------------------------------------

    def execute(self, budget_s: float) -> RunResult:
        tracker = threading.Thread(target=self._track, daemon=True)
        try:
            self.sink.prepare()
            self.start()
            tracker.start()
            deadline = time.monotonic() + budget_s
            for fault in self.scenario.faults:
                if strike(self, fault, deadline):
                    self.result.faults += 1
            self._finish(deadline)
        except Exception as err:  # a harness-side failure is reported with the run, not raised
            self.result.error = f"{type(err).__name__}: {err}"
            self.log(f"error: {self.result.error}")
        finally:
            self._done.set()
            for job in self.jobs:
                job.kill()
            tracker.join(5)
            with self._lock:
                seen = dict(self.seen)
            left = wait_gone(seen, 10.0)
            if left:
                self.result.processes += [f"{pid} ({_cmdline(pid)})" for pid in alive(left)]
                kill_all(left)
            self._save_logs()
        try:
            self._check()
        except Exception as err:
            self.result.error = (self.result.error or "") + f" check failed: {type(err).__name__}: {err}"
        finally:
            self.sink.cleanup(keep=not self.result.ok)
        self.result.seconds = self.elapsed()
        return self.result

    def _finish(self, deadline: float) -> None:
        """Waits for the job to end; a coordinator that ended without FINISHED is run again."""
        while True:
            left = max(5.0, deadline - time.monotonic())
            code = self.job.wait(left)
            self.log(f"coordinator {len(self.jobs)} exited {code}")
            if code == 0:
                self.result.completed = True
                return
            if code == 2 or time.monotonic() > deadline:
                raise RuntimeError(f"sluice run exited {code}")
            # SUSPENDED (3) or FAILED (1): the next coordinator resumes or reports the stored result.
            self.start()

    def _check(self) -> None:
        got = self.sink.output()
        expected = self.sink.reference()
        missing = expected - got
        if self.result.completed:
            self.result.lost = missing
        else:
            self.result.unwritten = missing
        self.result.duplicated = got - expected
        self.result.prepared = self.sink.prepared()
        self.result.files = self.sink.stray_files()
        if not self.result.ok:
            self.result.stderr_tail = "".join(_tail(n, job) for n, job in enumerate(self.jobs, 1))

    def _save_logs(self) -> None:
        directory = self.workdir / "logs"
        directory.mkdir(parents=True, exist_ok=True)
        for n, job in enumerate(self.jobs, 1):
            path = directory / f"coordinator-{n}.log"
            path.write_text(" ".join(job.command) + "\n\n" + job.stderr)
            self.result.logs.append(path)
        (directory / "events.log").write_text("\n".join(self.result.events) + "\n")


def _tail(number: int, job: SluiceJob, lines: int = 15) -> str:
    # A TaskManager cut off mid-send floods stderr with asyncio's "socket.send() raised exception."
    kept = [line for line in job.stderr_lines if not line.startswith("socket.send() raised")]
    return f"--- coordinator {number} ({job.ended() or 'running'}):\n" + "".join(kept[-lines:])


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120].strip()
    return "?"


def canonical(row: Any) -> str:
    return json.dumps(json.loads(json.dumps(row)))


def send(pid: int, sig: signal.Signals) -> bool:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True
