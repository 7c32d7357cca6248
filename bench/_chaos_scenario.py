"""Randomized fault scenarios for the chaos harness, each drawn from its own `random.Random`.

A run's generator is seeded with "<seed>:<run>", so one run of a large sample can be replayed alone
(`bench/chaos.py --seed S --only R`) and gets the same scenario whatever ran before it. Every random
choice a run makes, including which TaskManager a fault hits, is drawn here, up front.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# Faults and when they strike. "delay": a random moment after the job (or the previous fault) got
# going; "after-checkpoint": as soon as the completed-checkpoint count rises, that is right after every
# TaskManager acknowledged it, while the sinks commit (notify_checkpoint_complete); "end": once the
# first subtask has finished, that is during the final checkpoint and the job-result write.
TM_KILL = "tm-sigkill"
TM_STOP = "tm-sigstop"
COORDINATOR_KILL = "coordinator-sigkill"
POSTGRES_RESTART = "postgres-restart"
S3_FAULT = "s3-fault"
SAVEPOINT = "savepoint"
STOP_RESUME = "stop-resume"
MOMENTS = {"delay": 0.45, "after-checkpoint": 0.4, "end": 0.15}
S3_MODES = ("refuse", "slow", "error")

HOSTS = {"processes": 0.85, "spark": 0.15}  # a Spark run starts its own JVM: slow, so rarer
SINKS = {"file": 0.4, "postgres": 0.35, "s3": 0.25}
# counts: windowed counts into one sink (tests/integration/pipelines/generated_counts.py, or
# postgres_counts.py); side-outputs: dead letters, a ctx.output side output and a window over it, each
# into its own FileSink (side_outputs.py; file and s3 sinks only).
PIPELINES = {"counts": 0.6, "side-outputs": 0.4}


@dataclass(frozen=True)
class Fault:
    kind: str
    moment: str
    delay_s: float
    """For "delay": seconds to wait; for "after-checkpoint": seconds to wait before watching."""
    victim: int = 0
    """Which TaskManager (index into the job's list, modulo its length)."""
    hold_s: float = 0.0
    """How long the fault lasts: a SIGSTOP, an S3 outage."""
    mode: str = ""
    """S3_FAULT: refuse | slow | error; SAVEPOINT: during which S3 mode (or "pass")."""

    def describe(self) -> str:
        extra = f" tm#{self.victim}" if self.kind in (TM_KILL, TM_STOP) else ""
        extra += f" {self.mode}" if self.mode else ""
        extra += f" for {self.hold_s:.1f}s" if self.hold_s else ""
        return f"{self.kind}{extra} @{self.moment}+{self.delay_s:.1f}s"


@dataclass(frozen=True)
class Scenario:
    run: int
    seed: int
    host: str
    sink: str
    count: int
    rate: int
    keys: int
    interval_ms: int
    heartbeat_s: float
    faults: tuple[Fault, ...] = field(default=())
    pipeline: str = "counts"

    @property
    def job_id(self) -> str:
        return f"chaos-{self.seed}-{self.run}"

    @property
    def expected_s(self) -> float:
        """How long the job's data takes to flow without faults (the source is rate-limited)."""
        return self.count / self.rate

    def describe(self) -> str:
        faults = ", ".join(f.describe() for f in self.faults)
        return (
            f"host={self.host} sink={self.sink} pipeline={self.pipeline} count={self.count} "
            f"rate={self.rate}/s keys={self.keys} "
            f"checkpoint-interval={self.interval_ms}ms heartbeat={self.heartbeat_s:.0f}s faults=[{faults}]"
        )


def _weighted(rng: random.Random, weights: dict[str, float]) -> str:
    return rng.choices(list(weights), list(weights.values()))[0]


def fault_kinds(sink: str, host: str, with_s3_proxy: bool) -> dict[str, float]:
    """The faults a scenario may draw, with their weights, given its sink and host."""
    kinds = {TM_KILL: 3.0, TM_STOP: 1.5, COORDINATOR_KILL: 1.5, SAVEPOINT: 1.0, STOP_RESUME: 1.0}
    if sink == "postgres":
        kinds[POSTGRES_RESTART] = 1.5
    if sink == "s3" and with_s3_proxy:
        kinds[S3_FAULT] = 2.5
    if host == "spark":
        # Each coordinator restart or resume starts a new JVM: keep Spark runs to a few.
        kinds[COORDINATOR_KILL] = kinds[STOP_RESUME] = 0.5
    return kinds


def scenario(
    seed: int,
    run: int,
    hosts: dict[str, float] | None = None,
    sinks: dict[str, float] | None = None,
    with_s3_proxy: bool = True,
    pipelines: dict[str, float] | None = None,
) -> Scenario:
    rng = random.Random(f"{seed}:{run}")
    host = _weighted(rng, hosts or HOSTS)
    sink = _weighted(rng, sinks or SINKS)
    rate = rng.choice([6000, 8000, 10000, 15000])
    # 3 to 8 seconds of data: long enough for several checkpoints and faults, short enough for 200 runs.
    count = int(rate * rng.uniform(3.0, 8.0)) // 1000 * 1000
    keys = rng.choice([10, 50])
    interval_ms = rng.choice([200, 300, 500, 1000])
    # 2 s lets a SIGSTOP be noticed soon. TaskManagers heartbeat from a thread, so a sink waiting on a
    # slow S3 no longer silences them; a TaskManager inside a Spark Python worker on a loaded 2-core
    # machine still goes quiet for over 2 s now and then without any fault (CPU starvation beside the
    # JVMs), and every attempt would fail: those get 5 s.
    heartbeat = 2.0 if host == "processes" else 5.0
    kinds = fault_kinds(sink, host, with_s3_proxy)
    faults = []
    for _ in range(rng.randint(1, 3)):
        kind = _weighted(rng, kinds)
        moment = _weighted(rng, MOMENTS)
        # Faults come one after another: spread them over the run, not all at its start.
        delay = rng.uniform(0.0, count / rate / 2)
        victim = rng.randrange(64)
        hold = 0.0
        mode = ""
        if kind == TM_STOP:
            hold = heartbeat + rng.uniform(0.5, 3.0)  # longer than the heartbeat timeout
        elif kind == S3_FAULT:
            mode = rng.choice(S3_MODES)
            hold = rng.uniform(0.5, 4.0)
        elif kind in (SAVEPOINT, STOP_RESUME) and sink == "s3" and with_s3_proxy:
            mode = rng.choice(("pass", *S3_MODES))  # the savepoint meets S3 in that state
            hold = rng.uniform(0.5, 3.0) if mode != "pass" else 0.0
        faults.append(Fault(kind, moment, round(delay, 2), victim, round(hold, 2), mode))
    # Drawn last, so the rest of a seed's scenarios stay what they were before pipelines were drawn.
    choices = {p: w for p, w in (pipelines or PIPELINES).items() if sink != "postgres" or p == "counts"}
    pipeline = _weighted(rng, choices) if choices else "counts"
    return Scenario(run, seed, host, sink, count, rate, keys, interval_ms, heartbeat, tuple(faults), pipeline)
