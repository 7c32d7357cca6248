"""The job result store: `<checkpoint-dir>/<job-id>/job-result.json`, written when a job ends.

It is written before anything is cleaned up, so a coordinator restarted for a job that already ended
reports the stored result instead of running the job a second time.

A stored result stops a job id for good, so it is authenticated like `_metadata`: an HMAC-SHA-256 with
the deployment's state key over its canonical JSON (`sluice.checkpoint.integrity`). A result without a
valid MAC, or one that names another job, is not believed: it is logged once, with its path and why,
and the job runs as if it had no stored end. Its own end then replaces the file. The document and that
rule are the contract's (`sluice_contract.results`), which the operator reads results with too; this
module is the runtime's storage of it: the file, sealing, retries and the log.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid

from fsspec.implementations.local import LocalFileSystem

from sluice._fs import filesystem, join, make_dirs
from sluice.checkpoint.integrity import seal
from sluice.checkpoint.state_key import StateKey
from sluice_contract.results import RESULT_FILE, Disbelieved, JobResult, believed

__all__ = ["JobResult", "read_result", "result_uri", "store_result", "write_result"]

log = logging.getLogger(__name__)
RESULT_WRITE_RETRIES_S = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
_disbelieved: set[tuple[str, str]] = set()
"""(path, why) of the results already reported as not believed: the runner and the job master of one
`sluice run` both read the result, and the warning is worth one line."""


def result_uri(job_dir: str) -> str:
    return join(job_dir, RESULT_FILE)


def read_result(job_dir: str, job_id: str, key: StateKey) -> JobResult | None:
    """The stored end of job `job_id`, when there is one this deployment's key authenticated.

    Raises FormatError only for an authenticated result with a malformed field: something Sluice itself
    wrote wrong, which no one should quietly run past.
    """
    uri = result_uri(job_dir)
    fs, path = filesystem(uri)
    if not fs.exists(path):
        return None
    with fs.open(path, "rb") as handle:
        payload = handle.read()
    found = believed(payload, job_id, key.secret, uri)
    if isinstance(found, Disbelieved):
        _disbelieve(uri, job_id, found.why)
        return None
    return found


def _disbelieve(uri: str, job_id: str, why: str) -> None:
    """Logs, once per file and reason, that a stored result is not believed."""
    if (uri, why) not in _disbelieved:
        _disbelieved.add((uri, why))
        log.warning(
            "%s %s, so it is not believed: job %s runs as if it had not ended. Sluice authenticates "
            "every result it stores with the deployment's state key; this one was put there by someone "
            "else, or written by a Sluice from before results were authenticated. If the job did end "
            "(under an older Sluice), stop it and delete %s; otherwise its own end replaces the file",
            uri,
            why,
            job_id,
            uri,
        )


def write_result(job_dir: str, result: JobResult, key: StateKey) -> None:
    fs, path = filesystem(result_uri(job_dir))
    directory = path.rsplit("/", 1)[0]
    make_dirs(fs, directory)
    payload = json.dumps(seal(result.to_json(), key), indent=1).encode()
    if isinstance(fs, LocalFileSystem):
        # A coordinator killed half way through must not leave a truncated result: a restarted one
        # would not believe it, and run the ended job again. Write aside, then rename.
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


async def store_result(job_dir: str, result: JobResult, key: StateKey) -> None:
    """Writes the job result, retrying through a storage outage: without it a restarted coordinator
    would run the job again."""
    for delay in (*RESULT_WRITE_RETRIES_S, None):
        try:
            await asyncio.to_thread(write_result, job_dir, result, key)
            return
        except Exception as err:
            if delay is None:
                log.error(
                    "the job ended %s, but writing its result to %s failed for good: %s: %s; a "
                    "coordinator started again for this job will not know it ended",
                    result.state,
                    job_dir,
                    type(err).__name__,
                    err,
                )
                return
            log.warning(
                "writing the job result failed (%s: %s); again in %gs", type(err).__name__, err, delay
            )
            await asyncio.sleep(delay)
