"""W1 on runtimes of other commits: the pieces `bench/wire.py` and `bench/metrics_cost.py` share.

A variant's runtime comes from a temporary git worktree of its commit (its `runtime/` first on
PYTHONPATH) or, with no tree, from this checkout. Each run is a fresh `sluice run` of W1 (parallelism 2,
process host, checkpoints every second); its rate is n over the coordinator's job time.
"""

from __future__ import annotations

import contextlib
import json
import resource
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _harness import REPO, BenchJob, TreeCpu
from _spark_host import first_record_time, write_probe_pipeline


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()


def parent_of_commit_adding(path: str) -> str:
    """The commit just before `path` was added: the runtime without what that file brought."""
    added = git("log", "--diff-filter=A", "--format=%H", "--", path).split()
    if not added:
        raise SystemExit(f"no commit adds {path}: give --baseline REF")
    return f"{added[-1]}^"


@contextlib.contextmanager
def worktrees(commits: dict[str, str], work: Path) -> Iterator[dict[str, Path]]:
    """A detached worktree of each commit under `work`, removed afterwards."""
    trees = {name: work / name.replace(" ", "-") for name in commits}
    try:
        for name, commit in commits.items():
            subprocess.run(
                ["git", "worktree", "add", "-q", "--detach", str(trees[name]), commit], cwd=REPO, check=True
            )
        yield trees
    finally:
        for tree in trees.values():
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, check=False)


def _reaped_cpu_s() -> float:
    """CPU seconds of this process's descendants that have ended and were waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_w1(
    n: int, work: Path, label: str, tree: Path | None, *extra: str, first_record: bool = False
) -> dict[str, Any]:
    """One W1 run on `tree`'s runtime (None: this checkout's): events/s, TaskManager CPU seconds (sampled
    while they run) and `tree_cpu_s`, the CPU seconds of the whole run as the kernel counted them: the
    coordinator, its TaskManagers and their compaction processes (each waited for by its parent).

    With `--host spark` in `extra`, `tree_cpu_s` is sampled from /proc instead (every 50 ms, each
    process's last figure): `sluice run` does not wait for the Spark driver JVM, whose CPU the kernel
    would then count to no one of ours.

    With `first_record`, W1's source is wrapped by `_spark_host.py`'s probe, and the run also reports
    `first_record_s`, from the start of the `sluice run` process to the first batch a source read, and
    `wall_s`, to its exit, and `exit_s`, from its last line (the job's verdict) to its exit."""
    if "spark" in extra:
        with TreeCpu() as sampled:
            figures = _run_w1(n, work, label, tree, *extra, first_record=first_record)
        return {**figures, "tree_cpu_s": sampled.total()}
    return _run_w1(n, work, label, tree, *extra, first_record=first_record)


def _run_w1(
    n: int, work: Path, label: str, tree: Path | None, *extra: str, first_record: bool
) -> dict[str, Any]:
    reaped_before = _reaped_cpu_s()
    run = work / f"{label.replace(' ', '')}-{time.monotonic_ns()}"
    out, chk = run / "out", run / "chk"
    pipeline = (tree or REPO) / "examples" / "w1_window_counts.py"
    probes: list[str] = []
    if first_record:
        (run / "probe").mkdir(parents=True)
        pipeline = write_probe_pipeline(run, pipeline)
        probes = ["--arg", f"probe={run / 'probe' / 'first'}"]
    options = [
        *("--arg", f"n={n}", "--arg", f"out={out}", "--parallelism", "2", "--host", "processes"),
        *("--checkpoint-dir", f"file://{chk}", "--checkpoint-interval", "1s", "--job-id", "w1"),
        *probes,
        *extra,
    ]
    env = {"PYTHONPATH": str(tree / "runtime")} if tree is not None else None
    job = BenchJob(pipeline, *options, env=env)
    job.wait_ready()
    started_ms = job.get("/v1/job")["startTime"]
    wall_s = job.wait(1200)
    ended_ms = json.loads((chk / "w1" / "job-result.json").read_text())["timestamp"]
    figures = {
        "events_per_s": n / ((ended_ms - started_ms) / 1000),
        "job_s": (ended_ms - started_ms) / 1000,
        "cpu_s": sum(job.cpu.values()),
        "tree_cpu_s": _reaped_cpu_s() - reaped_before,
    }
    if first_record:
        first = first_record_time(run / "probe")
        assert first is not None, "the probe saw no record"
        figures.update(
            first_record_s=first - job.started_at, wall_s=wall_s, exit_s=job.exited_at - job.last_line_at
        )
    return figures


def interleaved_w1(
    commits: dict[str, str], n: int, repeat: int, prefix: str, *extra: str, first_record: bool = False
) -> dict[str, list[dict[str, Any]]]:
    """W1 `repeat` times on each commit (a temporary worktree each), the order reversed every other
    round so neither variant always runs first: each variant's runs, as `run_w1` reports them. `extra`:
    more `sluice run` options for every run (a later `--host` wins over the process host)."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in commits}
    try:
        with worktrees(commits, work) as trees:
            order = list(commits)
            for r in range(repeat):
                for variant in order if r % 2 == 0 else order[::-1]:
                    runs[variant].append(
                        run_w1(n, work, variant, trees[variant], *extra, first_record=first_record)
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return runs
