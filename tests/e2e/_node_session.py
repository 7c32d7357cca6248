"""The real node made ready beside the other tiers, and held for the whole test run.

    PYTHONPATH=tests .venv/bin/python -m e2e._node_session READY_FILE

`scripts/test.sh` starts this process in the background once the set-up is done. Building the image,
bringing the cluster up and importing the image take a minute or two of mostly one core; run inside
the e2e tier they lay on the real node's worker, the tier's tail, while the lint, type and unit steps
before it keep only one of the machine's two cores busy.

What it does, in this order:

1. takes the node's lease (`node_lease`: it waits, saying for whom, while another run holds it);
2. prepares the node as the session fixture would (`prepare_node`: image, `up`, `load`);
3. writes READY_FILE, atomically: the prepared node as JSON, or `{"error": ...}` saying what failed;
4. holds the lease until SIGTERM or SIGINT, or until its parent (the run) is gone;
5. takes the node down, unless it was already up when it began (or `SLUICE_KEEP_CLUSTER=1`), and only
   then gives the lease back.

The e2e tier's `real_node` fixture, given READY_FILE and this process's pid
(`SLUICE_REAL_NODE_SESSION`, `SLUICE_REAL_NODE_SESSION_PID`), waits for the file and uses the node
without a lease of its own (`wait_prepared`): this process holds it for the run, and takes the node
down after the run's last tier.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from e2e._real_node import PreparedNode, lease_path, node_is_up, node_lease, prepare_node, take_down
from testkit.pids import running

SESSION_ENV = "SLUICE_REAL_NODE_SESSION"
SESSION_PID_ENV = "SLUICE_REAL_NODE_SESSION_PID"


def write_ready(path: Path, prepared: PreparedNode | None, error: str | None = None) -> None:
    """READY_FILE, whole or not at all: a reader never sees half of it."""
    body = {"error": error} if error is not None else prepared.to_json() if prepared else {}
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(body))
    partial.replace(path)


def wait_prepared(path: Path, holder_pid: int, poll_s: float = 0.5) -> PreparedNode:
    """The node the holder prepared: waits for READY_FILE for as long as the holder lives (it may be
    waiting for another run's lease, or building the image cold), and fails with what it said."""
    while not path.exists():
        if not running(holder_pid):
            raise RuntimeError(
                f"the real node's session process ({holder_pid}) ended without preparing the node "
                f"(no {path}); its output is in the run's log above"
            )
        time.sleep(poll_s)
    body = json.loads(path.read_text())
    if "error" in body:
        raise RuntimeError(f"the real node could not be prepared for this run:\n{body['error']}")
    return PreparedNode.from_json(body)


def hold(ready: Path, poll_s: float = 1.0) -> None:
    """Steps 1 to 5 of the module's docstring."""
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    parent = os.getppid()
    with node_lease(lease_path()):
        started = time.monotonic()
        was_up = node_is_up()
        try:
            prepared = prepare_node(say=_say)
        except Exception as err:
            write_ready(ready, None, error=str(err))
            _say(f"the real node could not be prepared: {err}")
        else:
            write_ready(ready, prepared)
            _say(f"real node ready beside the other tiers in {time.monotonic() - started:.0f}s")
        try:
            while not stop.wait(poll_s) and os.getppid() == parent:
                pass
        finally:
            if not was_up:
                take_down()


def _say(line: str) -> None:
    print(f"test.sh: {line}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m e2e._node_session READY_FILE")
    hold(Path(sys.argv[1]))
