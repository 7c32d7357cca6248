"""CPU seconds of the JVMs (and PySpark workers) that a command starts, by kind.

    .venv/bin/python bench/jvm_cpu.py -- .venv/bin/pytest tests/e2e/test_bounded_job.py -q -p no:cacheprovider

Samples every process of the machine every 0.2 s while the command runs and keeps the last CPU figure
(user + system, /proc/PID/stat) of each process it recognises: Spark executor JVMs on Kubernetes, Spark
drivers on Kubernetes (the coordinator's JVM with Sluice's feature-step jar on its class path), local
Spark drivers, and PySpark worker daemons with the workers they fork (the TaskManagers). Pods of the
process kubelet and of the real node are processes of this machine too, so the e2e tests' pods are
counted wherever they run. A process that lives less than a sample's interval may be missed, and the
last 0.2 s of each one's CPU is not seen: the figures are a floor. Run it on a quiet machine and
compare two variants with the same command (bench/README.md, "Executor JVMs").
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import time
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
KINDS = (
    ("Spark executor JVM (Kubernetes)", b"KubernetesExecutorBackend"),
    ("Spark driver JVM (Kubernetes)", b"sluice-spark-kubernetes.jar"),
    ("PySpark daemon and TaskManagers", b"sluice.hosts.spark._daemon"),
    ("Spark driver JVM (local)", b"org.apache.spark.deploy.SparkSubmit"),
)


def _kind(pid: str) -> str | None:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return next((name for name, mark in KINDS if mark in command), None)


def _cpu_s(pid: str) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


def sample(command: list[str], interval: float = 0.2) -> tuple[int, dict[str, list[float]]]:
    """Runs `command`; returns its exit code and, per kind, each recognised process's CPU seconds."""
    # pid -> (its program's name, its kind or None): a pod's process starts as the image's entrypoint
    # (a shell) and then execs the JVM, so a process is looked at again when its program changes.
    seen: dict[str, tuple[str, str | None]] = {}
    last: dict[str, tuple[str, float]] = {}
    child = subprocess.Popen(command)
    while True:
        for entry in os.scandir("/proc"):
            pid = entry.name
            if not pid.isdigit():
                continue
            program = _program(pid)
            if pid not in seen or seen[pid][0] != program:
                seen[pid] = (program, _kind(pid))
            kind = seen[pid][1]
            if kind is not None and (cpu := _cpu_s(pid)) is not None:
                last[pid] = (kind, cpu)
        if child.poll() is not None:
            break
        time.sleep(interval)
    by_kind: dict[str, list[float]] = collections.defaultdict(list)
    for kind, cpu in last.values():
        by_kind[kind].append(cpu)
    return child.returncode, by_kind


def _program(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    started = time.monotonic()
    code, by_kind = sample(command)
    print(f"\n# {' '.join(command)}: exit code {code}, {time.monotonic() - started:.1f} s wall\n")
    print("| kind | processes | CPU s | CPU s each (mean) |")
    print("|---|---|---|---|")
    for name, _ in KINDS:
        cpus = by_kind.get(name, [])
        mean = sum(cpus) / len(cpus) if cpus else 0.0
        print(f"| {name} | {len(cpus)} | {sum(cpus):.1f} | {mean:.2f} |")
    sys.exit(code)


if __name__ == "__main__":
    main()
