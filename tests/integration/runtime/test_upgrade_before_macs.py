"""After an upgrade, through `sluice run`: a job whose checkpoint an older Sluice wrote (`_metadata`
version 2, no MAC) is not restored from it, and the command the refusal names restores it.

The checkpoint is a real one, taken by a job that SIGTERM suspended, and then rewritten as version 2
wrote it: no MAC, no digests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from testkit.jobs import REPO, SluiceJob, run_job

UNBOUNDED = REPO / "examples" / "unbounded_counts.py"


def as_version_2(document: Any) -> Any:
    """`document` without what version 3 added: the MAC and every state file's digest."""
    if isinstance(document, dict):
        return {k: as_version_2(v) for k, v in document.items() if k not in ("integrity", "sha256")}
    if isinstance(document, list):
        return [as_version_2(v) for v in document]
    return document


def test_a_version_2_checkpoint_is_refused_with_the_command_that_restores_it(tmp_path: Path) -> None:
    def options(job_id: str) -> tuple[str, ...]:
        return (
            *("--arg", f"out={tmp_path / job_id}", "--arg", "rate=2000"),
            *("--checkpoint-dir", f"file://{tmp_path / 'chk'}", "--checkpoint-interval", "300ms"),
            *("--job-id", job_id, "--state-key-file", str(key)),
        )

    key = tmp_path / "config" / "state.key"
    key.parent.mkdir(mode=0o700)
    key.write_text("ab" * 32 + "\n")
    key.chmod(0o600)
    first = SluiceJob(UNBOUNDED, *options("orders"))
    try:
        first.wait_checkpoints(2)
    finally:
        first.kill()  # SIGTERM: suspended, its checkpoints kept
    assert first.wait(60) == 3, first.stderr
    (metadata,) = sorted((tmp_path / "chk" / "orders").glob("chk-*/_metadata"))
    document = as_version_2(json.loads(metadata.read_text()))
    metadata.write_text(json.dumps({**document, "version": 2}))
    checkpoint = f"file://{metadata.parent}"

    refused = run_job(UNBOUNDED, *options("orders"), timeout=120)
    assert refused.returncode == 3, refused.stderr
    last = refused.stderr.strip().splitlines()[-1]
    assert f"--job-id <a new id> --from-savepoint {checkpoint} --trust-savepoint" in last, last
    assert "spec.trustSavepoint: true" in last

    # The command it names, with a new job id: restored, with a warning that names the checkpoint.
    resumed = SluiceJob(UNBOUNDED, *options("orders-2"), "--from-savepoint", checkpoint, "--trust-savepoint")
    try:
        resumed.wait_until(lambda: resumed.get("/v1/job")["state"] == "RUNNING", what="the job running")
        assert resumed.get("/v1/job")["restoredFrom"]["path"] == checkpoint
        resumed.wait_checkpoints(1)
    finally:
        resumed.kill()
    assert f"restoring {checkpoint} although its _metadata carries no MAC" in resumed.stderr
