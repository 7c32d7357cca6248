"""The chaos harness (issue 15): randomized faults against real jobs, every output checked.

Each run draws a scenario from `random.Random("<seed>:<run>")` (host, sink, records, rate, checkpoint
interval, 1-3 faults at random moments), runs the job as a `sluice run` subprocess, strikes the faults,
sees the job to its end (running the coordinator again when it was killed), and compares the output
with the plain-Python reference as a multiset of rows. See bench/README.md, "Chaos harness".

    .venv/bin/python bench/chaos.py --runs 200 --seed 1
    .venv/bin/python bench/chaos.py --seed 1 --only 17        # replay run 17 of that sample

The last line: `chaos: N runs, F faults, L lost, D duplicated, P leftover prepared transactions,
O leftover files` (L and D count rows); the exit status is non-zero when any of L, D, P, O, or the
leftover processes or harness errors reported above it, is not zero.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

# The harness reuses the test kit (SluiceJob, the reference outputs, the PostgreSQL and S3 servers).
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "tests")]

from _chaos_proxy import FaultProxy  # noqa: E402
from _chaos_run import ChaosRun, RunResult  # noqa: E402
from _chaos_scenario import HOSTS, PIPELINES, SINKS, scenario  # noqa: E402
from _chaos_services import Services  # noqa: E402

RUN_BUDGET_S = {"processes": 240.0, "spark": 480.0}


def _weights(names: list[str] | None, defaults: dict[str, float]) -> dict[str, float]:
    if not names:
        return defaults
    unknown = [n for n in names if n not in defaults]
    if unknown:
        raise SystemExit(f"chaos: unknown {unknown}; choose from {sorted(defaults)}")
    return {n: defaults[n] for n in names}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--only", type=int, action="append", help="run only this run number (repeatable)")
    p.add_argument("--host", action="append", choices=sorted(HOSTS), help="limit hosts (repeatable)")
    p.add_argument("--sink", action="append", choices=sorted(SINKS), help="limit sinks (repeatable)")
    p.add_argument(
        "--pipeline", action="append", choices=sorted(PIPELINES), help="limit pipelines (repeatable)"
    )
    p.add_argument("--no-proxy", action="store_true", help="S3 jobs talk to the S3 server directly")
    p.add_argument("--workdir", type=Path, help="default: a new temporary directory")
    p.add_argument("--verbose", action="store_true", help="print the events of every run, not only failed")
    p.add_argument("--keep", action="store_true", help="keep the work directory (failed runs always are)")
    return p


def report(result: RunResult, verbose: bool = False) -> str:
    sc = result.scenario
    lost, dup = sum(result.lost.values()), sum(result.duplicated.values())
    # Rows lost or duplicated break exactly-once; leftovers only leave garbage behind: keep them apart.
    if result.lost or result.duplicated:
        verdict = "LOST/DUP"
    elif result.violated:
        verdict = "LEFTOVER"
    else:
        # A run stopped before its job finished (the budget ran out) has rows still to write: that is
        # not evidence of loss, so it is an ERROR with those rows listed, not LOST.
        verdict = "ok" if result.ok else "ERROR"
    line = (
        f"run {sc.run:>3} seed {sc.seed} {verdict:<9} {result.seconds:5.1f}s faults {result.faults} "
        f"lost {lost} dup {dup} prepared {len(result.prepared)} files {len(result.files)} "
        f"processes {len(result.processes)} | {sc.describe()}"
    )
    if result.ok:
        return "\n".join([line, *(f"  event {e}" for e in result.events)]) if verbose else line
    details = [line]
    if result.error:
        details.append(f"  error: {result.error}")
    details += [f"  anomaly: {a}" for a in result.anomalies]
    for label, rows in (
        ("lost rows", result.lost),
        ("duplicated rows", result.duplicated),
        ("rows not yet written when the run was stopped", result.unwritten),
    ):
        if rows:
            shown = ", ".join(f"{r} x{n}" for r, n in sorted(rows.items())[:10])
            details.append(f"  {label} ({sum(rows.values())}): {shown}")
    for name, items in (
        ("prepared", result.prepared),
        ("files", result.files),
        ("processes", result.processes),
    ):
        if items:
            details.append(f"  leftover {name}: {items[:10]}")
    details += [f"  event {e}" for e in result.events]
    details.append(f"  logs: {', '.join(str(p) for p in result.logs)}")
    if result.stderr_tail:
        details.append("  stderr tails:")
        details += [f"    {line}" for line in result.stderr_tail.rstrip().splitlines()]
    return "\n".join(details)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    hosts, sinks = _weights(args.host, HOSTS), _weights(args.sink, SINKS)
    pipelines = _weights(args.pipeline, PIPELINES)
    if "counts" not in pipelines:  # the side-output pipeline writes files: no PostgreSQL runs
        sinks.pop("postgres", None)
        if not sinks:
            raise SystemExit("chaos: the side-output pipeline runs with the file or s3 sink only")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="sluice-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    # The jobs store their REST tokens here, not in the user's state directory (restored at the end:
    # the CI sample calls `main` inside a pytest session).
    saved = {name: os.environ.get(name) for name in ("XDG_STATE_HOME", "SLUICE_REST_TOKEN")}
    os.environ["XDG_STATE_HOME"] = str(workdir / "xdg-state")
    os.environ.pop("SLUICE_REST_TOKEN", None)
    numbers = args.only or list(range(1, args.runs + 1))
    started = time.monotonic()
    services = Services(workdir)
    proxy: FaultProxy | None = None
    results: list[RunResult] = []
    try:
        for number in numbers:
            sc = scenario(
                args.seed, number, hosts, sinks, with_s3_proxy=not args.no_proxy, pipelines=pipelines
            )
            if sc.sink == "s3" and proxy is None and not args.no_proxy:
                proxy = FaultProxy(services.s3().port)
            run = ChaosRun(sc, services, workdir / f"run-{number}", proxy)
            result = run.execute(RUN_BUDGET_S[sc.host])
            results.append(result)
            print(report(result, args.verbose), flush=True)
    finally:
        if proxy is not None:
            proxy.close()
        services.close()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    faults = sum(r.faults for r in results)
    lost = sum(sum(r.lost.values()) for r in results)
    dup = sum(sum(r.duplicated.values()) for r in results)
    prepared = sum(len(r.prepared) for r in results)
    files = sum(len(r.files) for r in results)
    processes = sum(len(r.processes) for r in results)
    errors = sum(r.error is not None or bool(r.anomalies) for r in results)
    print(
        f"chaos: seed {args.seed}, {time.monotonic() - started:.0f}s, {processes} leftover processes, "
        f"{errors} runs with errors or anomalies, work directory {workdir}",
        flush=True,
    )
    print(
        f"chaos: {len(results)} runs, {faults} faults, {lost} lost, {dup} duplicated, "
        f"{prepared} leftover prepared transactions, {files} leftover files",
        flush=True,
    )
    clean = lost == dup == prepared == files == processes == errors == 0
    if clean and not args.keep and args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if clean else 1


def _exit_on_sigterm(signum: int, frame: object) -> None:
    # A SystemExit unwinds through the finally blocks: the running job, the proxy, PostgreSQL and the S3
    # server are stopped instead of outliving the harness.
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    sys.exit(main())
