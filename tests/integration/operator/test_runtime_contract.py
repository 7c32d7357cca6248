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
from sluice_contract.states import StopMode
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
    # A Spark JVM can take over a minute to start on a loaded 2-core machine (seen at load 20).
    deadline = time.monotonic() + 180
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
                    await stranger.trigger_savepoint(StopMode.TERMINATE, f"file://{tmp / 'sp'}")
            deadline = time.monotonic() + 60
            while (await coordinator.job()).state != "RUNNING" and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            job = await coordinator.job()
            assert (job.job_id, job.state) == (JOB_ID, "RUNNING")
            assert job.subtasks.total >= 1 and job.start_time is not None
            done = await _until(
                coordinator, await coordinator.trigger_savepoint(None, f"file://{tmp / 'sp'}")
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
                coordinator, await coordinator.trigger_savepoint(StopMode.SUSPEND, f"file://{tmp / 'sp'}")
            )
            assert stopped.status == "COMPLETED", stopped
            assert process.wait(timeout=60) == 0
            storage = Storage(state_key=STATE_KEY)
            result = await storage.job_result(f"file://{tmp / 'chk'}", JOB_ID)
            assert result is not None and result.state == "FINISHED"
            assert result.stop_savepoint == stopped.path
            stop_snapshot = await storage.snapshot(str(stopped.path))
            assert stop_snapshot is not None and stop_snapshot.stop_mode is StopMode.SUSPEND  # "no-drain"

    asyncio.run(scenario())


REQUEST = "0b7c5a6e-1f2d-4c3b-9a8e-7d6c5b4a3f21.0"
"""A request id as the operator makes one: the Savepoint's uid and its attempt."""


def test_a_stop_asked_for_again_with_its_request_id_is_the_same_stop_and_its_result_names_it(
    running_job: tuple[subprocess.Popen[str], int, Path],
) -> None:
    process, port, tmp = running_job
    target = f"file://{tmp / 'sp'}"

    async def scenario() -> None:
        async with session() as http:
            coordinator = Coordinator(http, "127.0.0.1", port, token=TOKEN)
            deadline = time.monotonic() + 60
            while (await coordinator.job()).state != "RUNNING" and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            trigger = await coordinator.trigger_savepoint(StopMode.SUSPEND, target, request_id=REQUEST)
            # The operator lost its record of the answer and asks again: the same trigger, no second stop.
            again = await coordinator.trigger_savepoint(StopMode.SUSPEND, target, request_id=REQUEST)
            assert again == trigger
            # A request id names one request: another request under it is refused, and starts nothing.
            with pytest.raises(CoordinatorError, match=r"HTTP 409.*another request"):
                await coordinator.trigger_savepoint(StopMode.TERMINATE, target, request_id=REQUEST)
            with pytest.raises(CoordinatorError, match=r"HTTP 409.*another request"):
                await coordinator.trigger_savepoint(None, target, request_id=REQUEST)
            # Attacks on the field: refused as the body is read, before anything is looked up or started.
            url = f"http://127.0.0.1:{port}/v1/savepoints"
            for bad in ("r" * 65, "../../etc/passwd", "a\nInjected: 1", 7, ["x"], {"id": REQUEST}):
                body = {"stop": "suspend", "targetDirectory": target, "requestId": bad}
                headers = {"Authorization": f"Bearer {TOKEN}"}
                async with http.post(url, json=body, headers=headers) as answer:
                    refusal = await answer.json()
                    assert answer.status == 400 and "requestId must be" in refusal["error"], (bad, refusal)
            # The stop ends the job; until its caller has read the outcome the coordinator stays, and a
            # request asked for again now is still answered with its trigger, not "the job is FINISHED".
            deadline = time.monotonic() + 60
            while (await coordinator.job()).state == "RUNNING" and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            assert (await coordinator.job()).state == "FINISHED"
            late = await coordinator.trigger_savepoint(StopMode.SUSPEND, target, request_id=REQUEST)
            assert late == trigger
            taken = [c for c in (await coordinator.checkpoints()).history if c.kind == "savepoint"]
            assert len(taken) == 1, taken
            stopped = await _until(coordinator, trigger)
            assert stopped.status == "COMPLETED" and stopped.stop == "suspend", stopped
            assert process.wait(timeout=60) == 0
            assert [p.name for p in (tmp / "sp").iterdir()] == [str(stopped.path).rsplit("/", 1)[-1]]
            # Stored with the result, so the operator finds its stop from storage alone.
            result = await Storage(state_key=STATE_KEY).job_result(f"file://{tmp / 'chk'}", JOB_ID)
            assert result is not None and result.state == "FINISHED"
            assert (result.stop_savepoint, result.stop_request_id) == (stopped.path, REQUEST)

    asyncio.run(scenario())
