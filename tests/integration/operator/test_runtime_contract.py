"""The operator's view of the runtime, checked against a real `sluice run` (processes host, local files).

This is the contract the operator relies on (docs/reference/): the REST API for job state and
savepoints, and the storage layout (job result, checkpoint `_metadata`) for what it reads when the
coordinator is gone.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice_contract.rest import SavepointProgress
from sluice_operator.services.clients.rest import Coordinator, CoordinatorError, session
from sluice_operator.services.clients.storage import Storage

ROOT = Path(__file__).resolve().parents[3]
JOB_ID = "c0ffee0000000000000000000000beef"
TOKEN = "operator-drawn-token"
STATE_KEY = bytes(range(32))


@pytest.fixture
def running_job(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int, Path]]:
    log = tmp_path / "run.log"
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    # As the operator mounts the namespace's state key Secret into the coordinator.
    key_file = tmp_path / "state.key"
    key_file.write_text(STATE_KEY.hex())
    key_file.chmod(0o600)
    command = [
        sys.executable,
        "-c",
        "import sys; from sluice.cli import main; sys.exit(main())",
        "run",
        "examples/w1_window_counts.py",
        "--arg",
        "n=500000000",
        "--arg",
        f"out={tmp_path / 'out'}",
        "--parallelism",
        "1",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval",
        "1s",
        "--savepoint-dir",
        f"file://{tmp_path / 'sp'}",
        "--rest-port",
        "0",
        "--job-id",
        JOB_ID,
        # As the operator starts a coordinator: the token from a file, every call but health needs it.
        "--rest-token-file",
        str(token_file),
        "--rest-auth",
        "all",
        "--state-key-file",
        str(key_file),
    ]
    with log.open("w") as sink:
        process = subprocess.Popen(command, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    port = None
    while port is None and time.monotonic() < deadline and process.poll() is None:
        found = re.search(r"REST API at http://[\d.]+:(\d+)", log.read_text())
        port = int(found.group(1)) if found else None
        time.sleep(0.2)
    if port is None:
        process.kill()
        pytest.fail(f"sluice run did not start its REST API:\n{log.read_text()[-3000:]}")
    try:
        yield process, port, tmp_path
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def _until(coordinator: Coordinator, trigger: str, timeout: float = 60) -> SavepointProgress:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = await coordinator.savepoint(trigger)
        if answer.status != "IN_PROGRESS":
            return answer
        await asyncio.sleep(0.2)
    raise TimeoutError(f"savepoint {trigger} still in progress after {timeout}s")


def test_savepoint_then_suspend_then_read_storage(
    running_job: tuple[subprocess.Popen[str], int, Path],
) -> None:
    process, port, tmp = running_job

    async def scenario() -> None:
        async with session() as http:
            coordinator = Coordinator(http, "127.0.0.1", port, token=TOKEN)
            for stranger in (Coordinator(http, "127.0.0.1", port), Coordinator(http, "127.0.0.1", port, "x")):
                with pytest.raises(CoordinatorError, match=r"HTTP 40[13]"):
                    await stranger.job()
                with pytest.raises(CoordinatorError, match=r"HTTP 40[13]"):
                    await stranger.trigger_savepoint("terminate", f"file://{tmp / 'sp'}")
            deadline = time.monotonic() + 60
            while (await coordinator.job()).state != "RUNNING" and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            job = await coordinator.job()
            assert (job.job_id, job.state) == (JOB_ID, "RUNNING")
            assert job.subtasks.total >= 1 and job.start_time is not None
            done = await _until(
                coordinator, await coordinator.trigger_savepoint(False, f"file://{tmp / 'sp'}")
            )
            assert done.status == "COMPLETED", done
            path = str(done.path)
            snapshot = await Storage().snapshot(path)
            assert snapshot is not None and snapshot.kind == "savepoint" and snapshot.job_id == JOB_ID
            assert (await coordinator.job()).state == "RUNNING"  # stop: false keeps it running
            # While the job runs, the newest checkpoint can be found in storage without the coordinator.
            latest = None
            deadline = time.monotonic() + 20
            while latest is None and time.monotonic() < deadline:
                latest = await Storage().latest_checkpoint(f"file://{tmp / 'chk'}")
                await asyncio.sleep(0.2)
            assert latest is not None and latest.job_id == JOB_ID and latest.kind == "checkpoint"
            assert latest.path.startswith(f"file://{tmp / 'chk'}/{JOB_ID}/chk-")
            reported = (await coordinator.checkpoints()).latest
            assert reported is not None and reported.id >= latest.checkpoint_id
            stopped = await _until(
                coordinator, await coordinator.trigger_savepoint("suspend", f"file://{tmp / 'sp'}")
            )
            assert stopped.status == "COMPLETED", stopped
            assert process.wait(timeout=60) == 0
            storage = Storage(state_key=STATE_KEY)
            result = await storage.job_result(f"file://{tmp / 'chk'}", JOB_ID)
            assert result is not None and result.state == "FINISHED"
            assert result.stop_savepoint == stopped.path
            stop_snapshot = await storage.snapshot(str(stopped.path))
            assert stop_snapshot is not None and stop_snapshot.stop_mode == "no-drain"

    asyncio.run(scenario())
