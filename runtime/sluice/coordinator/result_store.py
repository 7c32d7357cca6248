"""The job result store: `<checkpoint-dir>/<job-id>/job-result.json`, written when a job ends.

It is written before anything is cleaned up, so a coordinator restarted for a job that already ended
reports the stored result instead of running the job a second time.
"""

from __future__ import annotations

import json
import time
from typing import Any

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
    last_checkpoint: str | None,
    error: str | None,
) -> dict[str, Any]:
    return {
        "jobId": job_id,
        "state": state,
        "timestamp": time.time_ns() // 1_000_000,
        "lastSavepoint": last_savepoint,
        "lastCheckpoint": last_checkpoint,
        "error": error,
    }


def write_result(job_dir: str, result: dict[str, Any]) -> None:
    fs, path = filesystem(result_uri(job_dir))
    make_dirs(fs, path.rsplit("/", 1)[0])
    with fs.open(path, "wb") as handle:
        handle.write(json.dumps(result, indent=1).encode())
