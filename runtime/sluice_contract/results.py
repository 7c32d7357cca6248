"""`job-result.json`: how a job ended, stored by its coordinator and read by a restarted coordinator and
the operator (docs/reference/storage-layout.md).

A stored result ends a job id for good, so neither side believes one its deployment's state key did not
seal (`sluice_contract.integrity`), nor one sealed for another job (copied there, it would end this job
with that one's end). `believed` is that rule, written once: each side reads the bytes its own way
(fsspec, a thread) and says in its own log that a result is not believed.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from sluice_contract.codec import Document, decode_object, is_none, wire
from sluice_contract.integrity import Verdict, key_id, verdict
from sluice_contract.states import JobState

RESULT_FILE = "job-result.json"
"""`<checkpoint-dir>/<job-id>/job-result.json`."""


@dataclass(frozen=True)
class JobResult(Document):
    """How a job ended. `last_savepoint` is the newest savepoint taken, `stop_savepoint` the one the job
    stopped with (None when it ended otherwise, for instance a bounded job whose input ended after a
    plain savepoint), and `stop_request_id` the request id its caller gave that stop (POST
    /v1/savepoints `requestId`): how a caller that lost the coordinator's answer finds, from storage
    alone, that its own stop completed and where its savepoint is.

    Whoever starts a new run from a result takes `stop_savepoint`, never `last_savepoint`: a bounded job
    that took a plain (periodic) savepoint and then ended on its own has one, and a run started from it
    would write everything after it a second time.
    """

    job_id: str
    state: JobState
    timestamp: int
    """When the job ended, ms since the epoch."""
    last_savepoint: str | None = None
    stop_savepoint: str | None = None
    last_checkpoint: str | None = None
    error: str | None = None
    stop_request_id: str | None = field(default=None, metadata=wire(omit_when=is_none))
    """Left out when None, so a result without a stop request keeps the bytes older versions wrote."""

    @staticmethod
    def now(
        job_id: str,
        state: JobState,
        last_savepoint: str | None,
        stop_savepoint: str | None,
        last_checkpoint: str | None,
        error: str | None,
        *,
        stop_request_id: str | None = None,
    ) -> JobResult:
        now_ms = time.time_ns() // 1_000_000
        return JobResult(
            job_id, state, now_ms, last_savepoint, stop_savepoint, last_checkpoint, error, stop_request_id
        )

    @staticmethod
    def parse(payload: bytes | str, where: str = RESULT_FILE) -> JobResult:
        """Parses a stored result; a malformed one raises DocumentError saying which field is wrong."""
        return JobResult.from_json(decode_object(payload, where), where)


@dataclass(frozen=True)
class Disbelieved:
    """A stored result that is not job `job_id`'s end, and why (`is not JSON`, `carries no MAC ...`):
    the phrase follows the file's name in a log line."""

    why: str


def believed(payload: bytes, job_id: str, secret: bytes, where: str = RESULT_FILE) -> JobResult | Disbelieved:
    """The stored result of job `job_id` when `secret`, the deployment's state key, sealed it and it names
    that job; else why it is not believed. The MAC is checked before any other field is looked at.

    Raises DocumentError for an authenticated result with a malformed field: something Sluice itself
    wrote wrong, which no one should quietly run past.
    """
    try:
        document = json.loads(payload)
    except (ValueError, RecursionError):  # cut short by a crash, or not Sluice's
        return Disbelieved("is not JSON")
    if not isinstance(document, dict):
        return Disbelieved("is not a JSON object")
    found = verdict(document, secret)
    if found is not Verdict.VALID:
        return Disbelieved(found.explain(key_id(secret)))
    if document.get("jobId") != job_id:
        return Disbelieved(f"is the result of job {document.get('jobId')!r}")
    return JobResult.from_json(document, where)
