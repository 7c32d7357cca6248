"""W1 on the Spark host and on the process host, side by side in one command.

`compare_w1(n)` runs examples/w1_window_counts.py (parallelism 2, 2 TaskManagers, checkpoints every
1 s) on both hosts, interleaved round by round (the order alternates), and returns for each host:

- `events_per_s`: n / (job end - first record), the processing rate once records flow;
- `job_events_per_s`: n / (job start - job end), with the TaskManagers' start (warm Spark);
- `first_record_cold_s`: from the start of a `sluice run` process (cold: a new Spark JVM for the Spark
  host) to the first record reaching the source's output, from separate shorter runs;
- `first_record_warm_s`: the same for a job started in a process that already runs Spark and has run
  a first stage (`sluice._inprocess`, the way tests and a long-lived driver run jobs); the one-time
  costs are reported apart: `spark_context_start_s` (JVM and SparkContext) and `spark_first_stage_s`
  (the first stage, which starts PySpark's worker daemon);
- `taskmanager_peak_rss_mb`: the largest peak resident set (VmHWM) of one TaskManager process; on the
  Spark host that is the Python worker Spark forked for the barrier task, which shares the pages of
  PySpark's daemon it was forked from; `taskmanager_peak_pss_mb` counts shared pages for their share.

n should make a run last several seconds: at about 1M events/s on this machine, 2M events are over in
2 s and the rate is dominated by noise; 6M gives steadier figures.

The first record is seen by wrapping W1's source: the first batch a split reader returns writes the
time to a file (once per reader, so the cost is nil per record). Everything else is W1 unchanged.

    .venv/bin/python bench/_spark_host.py --n 2000000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
W1 = REPO / "examples" / "w1_window_counts.py"
HOSTS = ("processes", "spark")
TASKMANAGERS = 2

_PROBE = '''"""W1 with a first-record probe on its source (written by bench/_spark_host.py)."""
import os, runpy, time

from sluice.connectors.base import Source, SplitReader

_W1 = runpy.run_path({w1!r})


class _Reader(SplitReader):
    def __init__(self, inner, marker):
        self.inner, self.marker = inner, marker

    def read(self, max_records):
        batch = self.inner.read(max_records)
        if self.marker is not None and batch:
            with open(f"{{self.marker}}.{{os.getpid()}}.{{id(self)}}", "w") as out:
                out.write(repr(time.time()))
            self.marker = None
        return batch

    def position(self):
        return self.inner.position()

    def close(self):
        self.inner.close()


class _Probed(Source):
    def __init__(self, inner, marker):
        self.inner, self.marker = inner, marker

    def splits(self):
        return self.inner.splits()

    def open_split(self, split):
        return _Reader(self.inner.open_split(split), self.marker)

    def records_per_second(self):
        return self.inner.records_per_second()


def build(env):
    marker = env.args["probe"]
    from_source = env.from_source
    env.from_source = lambda source, uid, name=None: from_source(_Probed(source, marker), uid, name)
    _W1["build"](env)
'''


def write_probe_pipeline(directory: Path, w1: Path = W1) -> Path:
    path = directory / "w1_probed.py"
    path.write_text(_PROBE.format(w1=str(w1)))
    return path


def first_record_time(probe_dir: Path) -> float | None:
    """The time (time.time()) of the first batch any probed source read, None if none did."""
    times = [float(p.read_text()) for p in probe_dir.glob("first.*") if p.read_text()]
    return min(times) if times else None


def _job_args(pipeline: Path, n: int, run_dir: Path) -> list[str]:
    return [
        str(pipeline),
        "--arg",
        f"n={n}",
        "--arg",
        f"out={run_dir / 'out'}",
        "--arg",
        f"probe={run_dir / 'probe' / 'first'}",
        "--parallelism",
        str(TASKMANAGERS),
        "--checkpoint-dir",
        f"file://{run_dir / 'chk'}",
        "--checkpoint-interval",
        "1s",
        "--rest-port",
        "0",
    ]


def _fresh(run_dir: Path) -> None:
    shutil.rmtree(run_dir, ignore_errors=True)
    (run_dir / "probe").mkdir(parents=True)


def cold_first_record(host: str, pipeline: Path, n: int, run_dir: Path) -> dict[str, float]:
    """`sluice run` in a new process: seconds from its start to the first record, and to its exit."""
    _fresh(run_dir)
    started = time.time()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sluice.cli",
            "run",
            *_job_args(pipeline, n, run_dir),
            "--host",
            host,
            "--quiet",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
        check=False,
    )
    ended = time.time()
    if done.returncode != 0:
        raise RuntimeError(f"sluice run --host {host} failed:\n{done.stderr}")
    first = first_record_time(run_dir / "probe")
    assert first is not None, "the probe saw no record"
    return {"first_record_s": first - started, "wall_s": ended - started}


class _PeakRss(threading.Thread):
    """Samples the TaskManagers' peak resident set (VmHWM) and largest PSS through the job's REST API."""

    def __init__(self, rest_url: str) -> None:
        super().__init__(daemon=True)
        self.rest_url, self._done = rest_url, threading.Event()
        self.peaks: dict[int, int] = {}
        self.pss: dict[int, int] = {}

    def run(self) -> None:
        while not self._done.wait(0.2):
            try:
                with urllib.request.urlopen(self.rest_url + "/v1/job", timeout=5) as response:
                    pids = [tm["pid"] for tm in json.loads(response.read())["taskManagers"]]
            except OSError:
                continue
            for pid in pids:
                kib = _status_kib(pid, "/status", "VmHWM:")
                if kib:
                    self.peaks[pid] = max(self.peaks.get(pid, 0), kib)
                # Proportional set size: pages shared with other processes (a forked worker shares
                # PySpark's modules with its daemon) count for their share only.
                self.pss[pid] = max(self.pss.get(pid, 0), _status_kib(pid, "/smaps_rollup", "Pss:"))

    def stop(self) -> dict[int, int]:
        self._done.set()
        self.join(5)
        return self.peaks


def _status_kib(pid: int, file: str, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}{file}").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def warm_run(host: Any, pipeline: Path, n: int, run_dir: Path) -> dict[str, float]:
    """One job in this process on `host` (a SparkHost on a running SparkContext, or a ProcessHost)."""
    from sluice._inprocess import start_job

    _fresh(run_dir)
    started = time.time()
    job = start_job(_job_args(pipeline, n, run_dir), host, default_checkpoint_dir=str(run_dir / "chk"))
    sampler = _PeakRss(job.rest_url())
    sampler.start()
    result = job.wait(900)
    peaks = sampler.stop()
    pss = sampler.pss
    if result["state"] != "FINISHED":
        raise RuntimeError(f"W1 on {host.name} ended {result['state']}: {result.get('error')}")
    first = first_record_time(run_dir / "probe")
    assert first is not None, "the probe saw no record"
    end = job.job.end_ms / 1000 if job.job.end_ms else time.time()
    return {
        "events_per_s": n / (end - first),
        "job_events_per_s": n / (end - started),
        "first_record_s": first - started,
        "taskmanager_peak_rss_mb": max(peaks.values(), default=0) / 1024,
        "taskmanager_peak_pss_mb": max(pss.values(), default=0) / 1024,
    }


def compare_w1(n: int, rounds: int = 3, cold_n: int = 200_000, workdir: Path | None = None) -> dict[str, Any]:
    """W1 on both hosts, interleaved; returns per-round figures and their medians for each host."""
    from sluice.hosts.processes import ProcessHost
    from sluice.hosts.spark import SparkHost, SparkLog, local_master, spark_settings, start_spark

    base = Path(workdir or tempfile.mkdtemp(prefix="sluice-bench-spark-"))
    pipeline = write_probe_pipeline(base)
    runs: dict[str, list[dict[str, float]]] = {h: [] for h in HOSTS}
    for r in range(rounds):
        for host in HOSTS if r % 2 == 0 else HOSTS[::-1]:
            cold = cold_first_record(host, pipeline, cold_n, base / "run")
            runs[host].append({"first_record_cold_s": cold["first_record_s"], "cold_wall_s": cold["wall_s"]})
    log = SparkLog(base / "spark.log")
    started = time.monotonic()
    context = start_spark(
        spark_settings(TASKMANAGERS, local_master(TASKMANAGERS), "sluice bench", log4j_file=str(log.config)),
        log,
    )
    spark_start_s = time.monotonic() - started
    try:
        # The first stage of a SparkContext also starts PySpark's worker daemon (imports included):
        # a one-time cost, reported on its own so that the warm figures are those of a running driver.
        started = time.monotonic()
        # (A lambda travels by value: this module need not be importable in Spark's workers.)
        stage = context.parallelize(range(TASKMANAGERS), TASKMANAGERS).barrier()
        stage.mapPartitions(lambda partition: iter(())).collect()
        first_stage_s = time.monotonic() - started
        hosts = {"processes": ProcessHost(), "spark": SparkHost(context)}
        for r in range(rounds):
            for name in HOSTS if r % 2 == 0 else HOSTS[::-1]:
                warm = warm_run(hosts[name], pipeline, n, base / "run")
                runs[name][r].update(
                    events_per_s=warm["events_per_s"],
                    job_events_per_s=warm["job_events_per_s"],
                    first_record_warm_s=warm["first_record_s"],
                    taskmanager_peak_rss_mb=warm["taskmanager_peak_rss_mb"],
                    taskmanager_peak_pss_mb=warm["taskmanager_peak_pss_mb"],
                )
    finally:
        context.stop()
        shutil.rmtree(base / "run", ignore_errors=True)
    medians = {
        host: {key: statistics.median(run[key] for run in runs[host]) for key in runs[host][0]}
        for host in HOSTS
    }
    return {
        "n": n,
        "cold_n": cold_n,
        "rounds": rounds,
        "spark_context_start_s": spark_start_s,
        "spark_first_stage_s": first_stage_s,
        "runs": runs,
        "median": medians,
        "spark_vs_processes_events_per_s": medians["spark"]["events_per_s"]
        / medians["processes"]["events_per_s"],
    }


def _main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cold-n", type=int, default=200_000, help="events in the cold-start runs")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    print(json.dumps(compare_w1(args.n, args.rounds, args.cold_n, args.workdir), indent=2))


if __name__ == "__main__":
    _main(sys.argv[1:])
