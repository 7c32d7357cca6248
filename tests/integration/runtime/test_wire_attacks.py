"""A stranger on the machine attacks every port a running job listens on; nothing runs, the job goes on.

The attacker finds the ports as the security issue did (/proc, as `ss -ltnp` would), then sends each
one a pickle whose loading creates a file, random bytes, half a frame, a 4 GiB length header, a forged
handshake and silence. The job must not load the pickle, must not grow its memory, must keep running
without a restart, and must still end with every output row exactly once. Both hosts: TaskManagers as
local processes, and as barrier tasks of a real local Spark.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sluice.transport.handshake import REFUSED
from testkit import spark
from testkit.checkpoints import GENERATED_COUNTS, generated_counts_options
from testkit.jobs import RestJob, SluiceJob
from testkit.outputs import assert_same_output, keyed_window_reference, read_output
from testkit.probe import attack, listening_ports, rss_kib
from testkit.spark import Runner, SparkJob

runner = spark.runner

_CHALLENGE_BYTES = 40
_HEX_SECRET = re.compile(rb"[0-9a-f]{64}")
# Growth a running job may show on its own while the attacks run (buffers, metrics): far below what
# reading one 4 GiB frame would take.
_RSS_SLACK_KIB = 64 * 1024


def _coordinator_pid(job: RestJob) -> int:
    return job.process.pid if isinstance(job, SluiceJob) else os.getpid()


def _job_ports(job: RestJob) -> set[int]:
    """Every port of the job but its REST API: what an attacker finds in /proc for its processes."""
    rest_port = urllib.parse.urlsplit(job.rest_url()).port
    ports = {port for pid in job.taskmanager_pids() for port in listening_ports(pid)}
    if isinstance(job, SparkJob):
        # The coordinator shares the test process with PySpark's own servers (its accumulator
        # server): take the control port from the job master instead of every port of the process.
        ports.add(int(job.handle.job.control_address.rsplit(":", 1)[1]))
    else:
        assert isinstance(job, SluiceJob)  # a `sluice run` process of its own
        ports |= listening_ports(job.process.pid) - {rest_port}
    return ports


def test_attacks_on_every_port_run_nothing_and_the_job_ends_exactly_once(
    runner: Runner, tmp_path: Path
) -> None:
    out, count, marker = tmp_path / "out", 120_000, tmp_path / "pwned"
    job = runner.start(
        GENERATED_COUNTS, *generated_counts_options(out, tmp_path / "chk", count, f"attacked-{runner.host}")
    )
    try:
        job.wait_checkpoints(1)
        taskmanagers = job.taskmanager_pids()
        pids = [_coordinator_pid(job), *taskmanagers]
        before = {pid: rss_kib(pid) for pid in pids}
        expected_ports = 1 + len(taskmanagers)  # the control port and one data port per TaskManager
        ports = _job_ports(job)
        with ThreadPoolExecutor(len(ports)) as pool:
            answers = dict(zip(ports, pool.map(lambda p: attack(p, marker), ports), strict=True))
        assert len(answers) >= expected_ports, f"found ports {sorted(answers)} for pids {pids}"
        for port, by_attack in answers.items():
            for name, answer in by_attack.items():
                # A Sluice port says its 40-byte challenge, whatever it was sent, and at most that the
                # proof was refused: nothing that came from the attacker.
                assert answer[:_CHALLENGE_BYTES].startswith(b"SLUICE"), (port, name, answer)
                assert answer[_CHALLENGE_BYTES:] in (b"", REFUSED), (port, name, answer)
        after = {pid: rss_kib(pid) for pid in pids}
        view = job.get("/v1/job")
        assert view["state"] == "RUNNING" and view["restarts"] == 0, view
        assert not marker.exists(), "a pickle from the network was loaded"
        for pid in pids:
            assert after[pid] - before[pid] < _RSS_SLACK_KIB, (pid, before[pid], after[pid])
        code = job.wait(180)
    finally:
        job.kill()
    assert code == 0, job.stderr
    assert not marker.exists()
    assert_same_output(read_output(f"file://{out}"), keyed_window_reference(count, 50, 1000, 10))
    assert "refused a data connection" in job.stderr or runner.host == "spark", job.stderr


def test_the_job_secret_is_in_no_command_line_environment_or_rest_answer(tmp_path: Path) -> None:
    out, count = tmp_path / "out", 40_000
    job = SluiceJob(GENERATED_COUNTS, *generated_counts_options(out, tmp_path / "chk", count, "secretive"))
    try:
        job.wait_checkpoints(1)
        for pid in [job.process.pid, *job.taskmanager_pids()]:
            for name in ("cmdline", "environ"):
                exposed = Path(f"/proc/{pid}/{name}").read_bytes()
                assert not _HEX_SECRET.search(exposed), f"/proc/{pid}/{name} holds a 256-bit hex string"
        body = json.dumps([job.get("/v1/job"), job.get("/v1/checkpoints")]).encode()
        assert not _HEX_SECRET.search(body)
        assert job.wait(120) == 0, job.stderr
    finally:
        job.kill()


def test_a_job_with_internal_tls_ends_exactly_once_and_speaks_no_plaintext(
    runner: Runner, tmp_path: Path
) -> None:
    out, count, marker = tmp_path / "out", 120_000, tmp_path / "pwned"
    job = runner.start(
        GENERATED_COUNTS,
        *generated_counts_options(out, tmp_path / "chk", count, f"tls-{runner.host}"),
        "--internal-tls",
    )
    try:
        job.wait_checkpoints(1)
        ports = _job_ports(job)
        with ThreadPoolExecutor(len(ports)) as pool:
            answers = dict(zip(ports, pool.map(lambda p: attack(p, marker), ports), strict=True))
        for port, by_attack in answers.items():
            for name, answer in by_attack.items():
                # A TLS endpoint answers a stranger's bytes with a TLS alert at most, never the
                # handshake's plaintext challenge.
                assert not answer.startswith(b"SLUICE"), (port, name, answer[:60])
        code = job.wait(180)
    finally:
        job.kill()
    assert code == 0, job.stderr
    assert not marker.exists()
    assert_same_output(read_output(f"file://{out}"), keyed_window_reference(count, 50, 1000, 10))
