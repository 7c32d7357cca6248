"""Attacks on a running job's REST API: requests without the job's token, with a wrong one, oversized or
malformed bodies, savepoint targets outside the allowed directories, a second savepoint while one runs.
Each is refused with its status and a message, and leaves the job running with nothing written; the
CLI of the job's own user still works without being handed the token.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from sluice._tokens import find_token, token_path
from testkit.jobs import REPO, SluiceJob, run_cli, run_job

UNBOUNDED = REPO / "examples" / "unbounded_counts.py"


def call(
    url: str, method: str = "GET", token: str | None = None, body: bytes | None = None, **headers: str
) -> tuple[int, dict[str, str], Any]:
    """Status, headers and JSON answer of one request; error statuses are answers here, not exceptions."""
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read())


def _unbounded(tmp_path: Path, *options: str, env: dict[str, str] | None = None) -> SluiceJob:
    return SluiceJob(
        UNBOUNDED,
        "--arg",
        f"out={tmp_path / 'out'}",
        "--arg",
        "rate=1000",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        *options,
        env=env,
    )


def test_mutations_without_the_right_token_are_refused_and_change_nothing(tmp_path: Path) -> None:
    sp = tmp_path / "sp"
    job = _unbounded(tmp_path, "--checkpoint-interval", "300ms", "--savepoint-dir", f"file://{sp}")
    try:
        job.wait_checkpoints(1)
        url, token = job.rest_url(), job.token()
        stored = token_path(job.job_id or "")
        assert stat.S_IMODE(stored.stat().st_mode) == 0o600
        assert stat.S_IMODE(stored.parent.stat().st_mode) == 0o700
        for path, body in (("/v1/savepoints", b'{"stop": "terminate"}'), ("/v1/job/cancel", b"")):
            status, headers, answer = call(url + path, "POST", body=body)
            assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer"), answer
            assert "Authorization: Bearer" in answer["error"]
            status, _, answer = call(url + path, "POST", token="not-" + token, body=body)
            assert status == 403, answer
            status, _, answer = call(url + path, "POST", body=body, Authorization=token)  # no scheme
            assert status == 401, answer
        for command in (["savepoint"], ["stop", "--drain"], ["cancel"]):
            refused = run_cli(*command, "--address", url, "--token", "guessed")
            assert refused.returncode == 1 and "403" in refused.stderr, refused.stderr
        # Reads stay open on loopback, and show no secret.
        for path in ("/v1/job", "/v1/checkpoints", "/v1/health"):
            status, _, answer = call(url + path)
            assert status == 200 and token not in json.dumps(answer), path
        job.wait_checkpoints(job.completed_checkpoints() + 2)
        assert job.get("/v1/job")["state"] == "RUNNING"
        assert not sp.exists(), "no refused request wrote a savepoint"

        # The job's own user needs no token: the CLI finds the stored one.
        stop = run_cli("stop", "--address", url)
        assert stop.returncode == 0, stop.stderr + job.stderr
        assert job.wait(60) == 0, job.stderr
    finally:
        job.kill()
    assert stop.stdout.strip().splitlines()[-1].startswith(f"file://{sp}/savepoint-")
    assert not stored.exists(), "the token file goes with the coordinator"


def test_bad_bodies_and_targets_get_400_and_write_nothing(tmp_path: Path) -> None:
    sp, evil = tmp_path / "sp", tmp_path / "evil"
    job = _unbounded(tmp_path, "--checkpoint-interval", "300ms", "--savepoint-dir", f"file://{sp}")
    evil_existed = Path("/tmp/evil").exists()
    try:
        job.wait_checkpoints(1)
        url, token = job.rest_url() + "/v1/savepoints", job.token()
        bodies = {
            b"x" * (70 * 1024): "at most 65536",
            b'{"targetDirectory": "' + b"a" * (64 * 1024) + b'"}': "at most 65536",
            b"[" * 60_000: "not JSON",  # deeper than Python's recursion limit, yet under 64 KiB
            b"\xff\xfe": "not JSON",
            b"not json": "not JSON",
            b'["suspend"]': "JSON object",
            b'"suspend"': "JSON object",
            b'{"stop": 1}': "stop must be",
            b'{"stop": "pause"}': "stop must be",
            b'{"stop": {"mode": "suspend"}}': "stop must be",
            b'{"targetDirectory": 42}': "URI string",
            b'{"targetDirectory": "file:///tmp/evil"}': "not under an allowed savepoint location",
            json.dumps({"targetDirectory": f"file://{evil}"}).encode(): "not under an allowed",
            json.dumps({"targetDirectory": f"file://{sp}/../evil"}).encode(): "not under an allowed",
            json.dumps({"targetDirectory": f"file://{sp}-evil"}).encode(): "not under an allowed",
            json.dumps({"stop": "suspend", "targetDirectory": str(evil)}).encode(): "not under an allowed",
            b'{"stop": "suspend", "extra": 1}': "unknown field",
        }
        for body, message in bodies.items():
            status, _, answer = call(url, "POST", token=token, body=body)
            assert status == 400 and message in answer["error"], (body[:60], status, answer)
        status, _, answer = call(
            url, "POST", token=token, body=b"x" * (70 * 1024), **{"Transfer-Encoding": "chunked"}
        )
        assert status == 400, answer
        status, _, answer = call(job.rest_url() + "/v1/job/cancel", "POST", token=token, body=b'{"now": 1}')
        assert status == 400 and "no fields" in answer["error"], answer
        escaped = run_cli("savepoint", "--address", job.rest_url(), "--savepoint-dir", f"file://{evil}")
        assert escaped.returncode == 1 and "not under an allowed" in escaped.stderr, escaped.stderr
        assert job.get("/v1/job")["state"] == "RUNNING"
        job.wait_checkpoints(job.completed_checkpoints() + 1)
    finally:
        job.kill()
    assert not sp.exists() and not evil.exists() and not (tmp_path / "sp-evil").exists()
    assert Path("/tmp/evil").exists() == evil_existed


def _all_running(view: dict[str, Any]) -> bool:
    states = [s["state"] for v in view["vertices"] for s in v["subtasks"]]
    return bool(view["taskManagers"]) and all(state == "RUNNING" for state in states)


def test_a_second_savepoint_while_one_runs_gets_409(tmp_path: Path) -> None:
    sp = tmp_path / "sp"
    # No periodic checkpoint that could be pending: the only one in flight is the test's savepoint.
    job = _unbounded(tmp_path, "--checkpoint-interval", "1h", "--savepoint-dir", f"file://{sp}")
    paused: list[int] = []
    try:
        job.wait_until(lambda: _all_running(job.get("/v1/job")), 60, "every subtask RUNNING")
        url, token = job.rest_url(), job.token()
        # A stopped TaskManager cannot acknowledge: the savepoint stays in progress until it goes on.
        paused.append(job.taskmanager_pids()[0])
        os.kill(paused[0], signal.SIGSTOP)
        status, _, first = call(url + "/v1/savepoints", "POST", token=token, body=b"{}")
        assert status == 202, first
        for body in (b"{}", b'{"stop": "terminate"}'):
            status, _, answer = call(url + "/v1/savepoints", "POST", token=token, body=body)
            assert status == 409 and "in progress" in answer["error"], answer
        os.kill(paused.pop(), signal.SIGCONT)
        done = job.wait_until(
            lambda: job.get(f"/v1/savepoints/{first['triggerId']}")["status"] != "IN_PROGRESS",
            60,
            "savepoint",
        )
        entry = job.get(f"/v1/savepoints/{first['triggerId']}")
        assert done and entry["status"] == "COMPLETED", entry
        assert job.get("/v1/job")["state"] == "RUNNING"
        assert len(list(sp.iterdir())) == 1, "the refused requests took no savepoint"
        status, _, answer = call(url + "/v1/savepoints", "POST", token=token, body=b"{}")
        assert status == 202, "once the first is done the next may start"
    finally:
        for pid in paused:
            os.kill(pid, signal.SIGCONT)
        job.kill()


def test_a_token_file_protects_reads_with_rest_auth_all(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("operator-made-token\n")
    job = _unbounded(
        tmp_path,
        "--checkpoint-interval",
        "300ms",
        "--rest-token-file",
        str(token_file),
        "--rest-auth",
        "all",
        env={"SLUICE_REST_TOKEN": "operator-made-token"},  # for the test's own requests
    )
    try:
        job.wait_checkpoints(1)
        url = job.rest_url()
        assert find_token(job.job_id or "") is None, "a token that was given is not copied anywhere"
        for path in ("/v1/job", "/v1/checkpoints", "/v1/savepoints/1"):
            status, headers, _ = call(url + path)
            assert status == 401 and "WWW-Authenticate" in headers, path
            assert call(url + path, token="wrong")[0] == 403, path
        assert call(url + "/v1/job", token="operator-made-token")[0] == 200
        status, _, health = call(url + "/v1/health")  # what the kubelet's probes call
        assert status == 200 and health == {"ok": True, "jobId": job.job_id}

        untold = run_cli("status", "--address", url)
        assert untold.returncode == 1 and "401" in untold.stderr and "--token" in untold.stderr
        told = run_cli("status", "--address", url, "--token", "operator-made-token", "-o", "json")
        assert told.returncode == 0 and json.loads(told.stdout)["state"] == "RUNNING", told.stderr
        cancel = run_cli("cancel", "--address", url, env={"SLUICE_REST_TOKEN": "operator-made-token"})
        assert cancel.returncode == 0, cancel.stderr
        assert job.wait(60) == 1
    finally:
        job.kill()


@pytest.mark.parametrize(
    ("options", "env", "message"),
    [
        (("--rest-token-file", "/nonexistent/token"), {}, "cannot read the REST token file"),
        ((), {"SLUICE_REST_TOKEN": "two words"}, "visible ASCII only"),
    ],
)
def test_sluice_run_refuses_a_token_it_cannot_use(
    tmp_path: Path, options: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    result = run_job(
        UNBOUNDED, "--arg", f"out={tmp_path}/out", "--checkpoint-dir", f"file://{tmp_path}", *options, env=env
    )
    assert result.returncode == 2 and message in result.stderr, result.stderr
