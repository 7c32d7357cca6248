"""FileSource and FileSink on a real S3-protocol server, with checkpoints there too."""

from __future__ import annotations

import collections
import json

import pytest

from testkit.checkpoints import PIPELINES
from testkit.inprocess import run_thread_job
from testkit.jobs import REPO, SluiceJob, run_cli
from testkit.outputs import assert_same_output, read_output
from testkit.s3 import S3Server

pytestmark = pytest.mark.s3


def test_files_from_s3_to_s3_exactly_once(s3_server: S3Server, s3_bucket: str) -> None:
    fs = s3_server.filesystem()
    expected: collections.Counter[str] = collections.Counter()
    for f in range(3):
        lines = [f"file {f} line {i}" for i in range(2000 * (f + 1))]
        fs.pipe(f"{s3_bucket.removeprefix('s3://')}/in/part-{f}.txt", ("\n".join(lines) + "\n").encode())
        expected.update(json.dumps([line, len(line)]) for line in lines)
    done = run_thread_job(
        PIPELINES / "copy_lines.py",
        "--arg",
        f"input={s3_bucket}/in/*.txt",
        "--arg",
        f"out={s3_bucket}/out",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"{s3_bucket}/chk",
        "--checkpoint-interval",
        "300ms",
    )
    assert done.returncode == 0, done.stderr
    assert_same_output(read_output(f"{s3_bucket}/out"), expected)
    names = [p.rsplit("/", 1)[-1] for p in fs.find(f"{s3_bucket.removeprefix('s3://')}/out")]
    assert names and all(n.startswith("part-") for n in names), "only published part files are left"


def test_a_savepoint_into_a_missing_bucket_fails_clearly_and_creates_no_bucket(
    s3_server: S3Server, s3_bucket: str
) -> None:
    job = SluiceJob(
        REPO / "examples" / "unbounded_counts.py",
        "--arg",
        f"out={s3_bucket}/out",
        "--checkpoint-dir",
        f"{s3_bucket}/chk",
        "--checkpoint-interval",
        "300ms",
        # A target the job may use, so that the request reaches the store and the bucket's absence.
        "--savepoint-dir-allow",
        f"{s3_bucket}-mistyped",
    )
    missing = f"{s3_bucket}-mistyped"
    try:
        job.wait_checkpoints(1)
        answer = run_cli("savepoint", "--address", job.rest_url(), "--savepoint-dir", f"{missing}/savepoints")
        assert answer.returncode == 1, answer.stdout
        assert "savepoint failed" in answer.stderr and "bucket" in answer.stderr.lower(), answer.stderr
        assert job.get("/v1/job")["state"] == "RUNNING", "a failed savepoint leaves the job running"
    finally:
        job.kill()
    # Writing a directory marker must not create the bucket: a typo would otherwise become a bucket.
    assert not s3_server.filesystem().exists(missing.removeprefix("s3://"))
