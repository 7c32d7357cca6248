"""A `job-result.json` planted in a job's directory does not stop its job id (issue 23).

Two readers decide whether a job already ended: the coordinator (`JobMaster.run`, reached here through
`sluice.testing`) and `sluice run`'s check before it starts anything. A planted FINISHED result without
the deployment's MAC is not believed by either: the job runs, its output is all there, and its own end
replaces the file. A result the job itself stored still ends the job id.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import sluice
from sluice._states import JobState
from sluice.checkpoint.integrity import seal
from sluice.checkpoint.state_key import load_state_key
from sluice.connectors import SequenceSource
from sluice.coordinator.result_store import JobResult
from sluice.testing import CollectingSink, run_job
from testkit.jobs import REPO
from testkit.jobs import run_job as run_cli_job

W1 = REPO / "examples" / "w1_window_counts.py"
PLANTED = JobResult("orders", JobState.FINISHED, 1_700_000_000_000).to_json()


def key_file(path: Path) -> Path:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_text(secrets.token_hex(32) + "\n")
    path.chmod(0o600)
    return path


def plant(checkpoint_dir: Path, document: dict[str, object]) -> Path:
    result = checkpoint_dir / "orders" / "job-result.json"
    result.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    result.write_text(json.dumps(document))
    return result


def squares(sink: CollectingSink):  # type: ignore[no-untyped-def]
    def build(env: sluice.StreamEnvironment) -> None:
        env.from_source(SequenceSource(0, 500), uid="numbers").map(lambda n: n * n, uid="square").sink_to(
            sink, uid="sink"
        )

    return build


def test_the_coordinator_runs_a_job_whose_planted_result_has_no_mac(tmp_path: Path) -> None:
    key = key_file(tmp_path / "config" / "state.key")
    planted = plant(tmp_path / "chk", PLANTED)
    options = (
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--job-id",
        "orders",
        "--state-key-file",
        str(key),
    )
    sink = CollectingSink()
    outcome = run_job(squares(sink), *options)
    assert (outcome.state, outcome.exit_code) == ("FINISHED", 0)
    assert sorted(sink.records()) == [n * n for n in range(500)]
    # Its own end replaced the planted one, authenticated: the next start believes it and runs nothing.
    stored = json.loads(planted.read_text())
    assert stored["timestamp"] != PLANTED["timestamp"] and "integrity" in stored
    again = CollectingSink()
    assert run_job(squares(again), *options).state == "FINISHED"
    assert again.records() == []


def test_sluice_run_runs_a_job_whose_planted_result_has_no_mac_and_stops_for_its_own(tmp_path: Path) -> None:
    key = key_file(tmp_path / "config" / "state.key")
    planted = plant(tmp_path / "chk", PLANTED)
    options = (
        "--arg",
        "n=2000",
        "--arg",
        f"out={tmp_path / 'out'}",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--job-id",
        "orders",
        "--state-key-file",
        str(key),
    )
    ran = run_cli_job(W1, *options)
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr.count("is not believed") == 1, ran.stderr
    assert f"{planted.as_uri()} carries no MAC" in ran.stderr
    assert "already ended" not in ran.stderr and list((tmp_path / "out").iterdir())

    # A result sealed with the deployment's key, as the job's own: believed, the job is not run again.
    plant(tmp_path / "chk", seal(PLANTED, load_state_key(str(key))))
    again = run_cli_job(W1, *options)
    assert again.returncode == 0, again.stderr
    assert "job orders already ended FINISHED" in again.stderr and "is not believed" not in again.stderr
