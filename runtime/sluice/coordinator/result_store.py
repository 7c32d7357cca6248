"""The job result store: `<checkpoint-dir>/<job-id>/job-result.json`, written when a job ends.

It is written before anything is cleaned up, so a coordinator restarted for a job that already ended
reports the stored result instead of running the job a second time.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from fsspec.implementations.local import LocalFileSystem

from sluice._fs import filesystem, join, make_dirs


def result_uri(job_dir: str) -> str:
    return join(job_dir, "job-result.json")


def read_result(job_dir: str) -> dict[str, Any] | None:
    fs, path = filesystem(result_uri(job_dir))
    if not fs.exists(path):
        return None
    with fs.open(path, "rb") as handle:
        result: dict[str, Any] = json.loads(handle.read())
    return result


def job_result(
    job_id: str,
    state: str,
    last_savepoint: str | None,
    stop_savepoint: str | None,
    last_checkpoint: str | None,
    error: str | None,
) -> dict[str, Any]:
    """`lastSavepoint` is the newest savepoint taken, `stopSavepoint` the one the job stopped with (None
    when it ended otherwise, for instance a bounded job whose input ended after a plain savepoint)."""
    return {
        "jobId": job_id,
        "state": state,
        "timestamp": time.time_ns() // 1_000_000,
        "lastSavepoint": last_savepoint,
        "stopSavepoint": stop_savepoint,
        "lastCheckpoint": last_checkpoint,
        "error": error,
    }


def write_result(job_dir: str, result: dict[str, Any]) -> None:
    fs, path = filesystem(result_uri(job_dir))
    directory = path.rsplit("/", 1)[0]
    make_dirs(fs, directory)
    payload = json.dumps(result, indent=1).encode()
    if isinstance(fs, LocalFileSystem):
        # A coordinator killed half way through must not leave a truncated result: a restarted one
        # would fail to read it, or worse, run the ended job again. Write aside, then rename.
        tmp = f"{directory}/.job-result.json.{uuid.uuid4().hex}"
        try:
            with fs.open(tmp, "wb") as handle:
                handle.write(payload)
            fs.mv(tmp, path)
        finally:
            if fs.exists(tmp):
                fs.rm(tmp)
        return
    # Object stores publish an object only once its upload completes.
    with fs.open(path, "wb") as handle:
        handle.write(payload)
