"""What authenticated (and encrypted) internal connections cost: W1 with and without them, one command.

    .venv/bin/python bench/wire.py [--n 2000000] [--repeat 3] [--baseline REF]

Runs W1 (examples/w1_window_counts.py, parallelism 2, process host, checkpoints every second) in three
variants, interleaved `--repeat` times:

- `without`: the runtime as it was before connections were authenticated (git REF, default the parent
  of the commit that added `runtime/sluice/transport/`), from a temporary git worktree;
- `authenticated`: this checkout (the handshake on every connection, JSON control messages);
- `authenticated + TLS`: this checkout with `--internal-tls`.

Each run is a fresh `sluice run` process; the rate is n over the coordinator's job time. The ratio is
each variant's median events/s over `without`'s. The baseline differs from this checkout in everything
committed since REF, not only in the transport; the table says which commit it ran.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import environment_note
from _w1_trees import git, parent_of_commit_adding, run_w1, worktrees

_TRANSPORT = "runtime/sluice/transport/handshake.py"
VARIANTS = ("without", "authenticated", "authenticated + TLS")
#: Authenticated connections of a W1 run on two TaskManagers: each TaskManager's control and heartbeat
#: connections to the coordinator, and one remote data channel each way.
_W1_CONNECTIONS = 6


def _run(n: int, work: Path, variant: str, baseline: Path) -> dict[str, Any]:
    if variant == "without":
        return run_w1(n, work, variant, baseline)
    return run_w1(n, work, variant, None, *(["--internal-tls"] if variant == "authenticated + TLS" else []))


def handshake_cost(count: int = 2000) -> dict[str, float]:
    """Seconds per authenticated connection (TCP connect, the four handshake messages, close), against
    a plain TCP connect and close, on loopback in this process."""
    import asyncio

    from sluice.transport.handshake import DATA
    from sluice.transport.secret import JobSecret
    from sluice.transport.wire import Wire

    async def measure() -> dict[str, float]:
        wire = Wire(JobSecret.generate())

        async def served(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.close()

        async def plain_served(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.close()

        authenticated = await wire.serve(served, "127.0.0.1", DATA)
        plain = await asyncio.start_server(plain_served, "127.0.0.1", 0)
        results = {}
        for name, server in (("plain", plain), ("authenticated", authenticated)):
            port = server.sockets[0].getsockname()[1]
            started = time.perf_counter()
            for _ in range(count):
                if name == "plain":
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                else:
                    _, writer = await wire.open("127.0.0.1", port, DATA)
                writer.close()
                await writer.wait_closed()
            results[name] = (time.perf_counter() - started) / count
            server.close()
        return results

    return asyncio.run(measure())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", default=None, help="git ref of the runtime without authentication")
    args = parser.parse_args()
    commit = git("rev-parse", "--short", args.baseline or parent_of_commit_adding(_TRANSPORT))
    work = Path(tempfile.mkdtemp(prefix="sluice-wire-"))
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    print(f"# W1 with and without authenticated connections, n = {args.n:,} ({environment_note()})\n")
    try:
        with worktrees({"baseline": commit}, work) as trees:
            for r in range(args.repeat):
                for variant in VARIANTS if r % 2 == 0 else VARIANTS[::-1]:
                    runs[variant].append(_run(args.n, work, variant, trees["baseline"]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = statistics.median(r["events_per_s"] for r in runs["without"])
    print("| variant | events/s (median) | vs without | TaskManager CPU s (median) |")
    print("|---|---|---|---|")
    for variant, samples in runs.items():
        rate = statistics.median(r["events_per_s"] for r in samples)
        cpu = statistics.median(r["cpu_s"] for r in samples)
        print(f"| {variant} | {rate:,.0f} | {rate / base:.3f}x | {cpu:.2f} |")
    print(f"\n`without` ran commit {commit}. Target: authentication costs < 3% of W1 events/s.")
    cost = handshake_cost()
    extra = cost["authenticated"] - cost["plain"]
    print(
        f"\nOne connection on loopback: plain {cost['plain'] * 1e3:.3f} ms, authenticated "
        f"{cost['authenticated'] * 1e3:.3f} ms (+{extra * 1e3:.3f} ms). W1 on two TaskManagers opens "
        f"{_W1_CONNECTIONS} (2 control, 2 heartbeat, 2 remote data channels): "
        f"+{_W1_CONNECTIONS * extra * 1e3:.1f} ms in a run of {args.n / base:.1f} s "
        f"({_W1_CONNECTIONS * extra / (args.n / base) * 100:.3f}%). Records cost the same either way: "
        "the same frames, pickled, on a connection authenticated once."
    )
    print("\nEach run:")
    for variant, samples in runs.items():
        print(f"- {variant}: " + ", ".join(f"{r['events_per_s']:,.0f}/s" for r in samples))


if __name__ == "__main__":
    main()
