"""Reading the runtime's storage layout (docs/reference/storage-layout.md) with fsspec.

The operator reads job results and checkpoint `_metadata` directly, so it knows how a job ended and
where its latest checkpoint is even when the coordinator pod is gone. Blocking fsspec calls run in a
worker thread to keep the operator's event loop free.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import fsspec

from sluice_contract.checkpoints import METADATA, latest_restorable
from sluice_contract.codec import decode_object
from sluice_contract.metadata import MetadataSummary
from sluice_contract.results import RESULT_FILE, Disbelieved, JobResult, believed

from ..common.observed import Snapshot

log = logging.getLogger(__name__)
_disbelieved: set[tuple[str, str]] = set()
"""(path, why) of results already reported as not believed: reconcile reads them again every round."""

# Environment keys of a storage secret -> fsspec (s3fs) options.
_S3_KEYS = {"AWS_ACCESS_KEY_ID": "key", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token"}


def storage_options(uri: str, credentials: Mapping[str, str]) -> dict[str, Any]:
    """fsspec options for `uri` from a storage secret's keys (or {} to use the operator's own env)."""
    if not uri.startswith(("s3://", "s3a://")) or not credentials:
        return {}
    options: dict[str, Any] = {v: credentials[k] for k, v in _S3_KEYS.items() if credentials.get(k)}
    client: dict[str, Any] = {}
    endpoint = credentials.get("AWS_ENDPOINT_URL_S3") or credentials.get("AWS_ENDPOINT_URL")
    if endpoint:
        client["endpoint_url"] = endpoint
    region = credentials.get("AWS_REGION") or credentials.get("AWS_DEFAULT_REGION")
    if region:
        client["region_name"] = region
    if client:
        options["client_kwargs"] = client
    return options


class Storage:
    """One job's view of object storage."""

    def __init__(self, options: Mapping[str, Any] | None = None, *, state_key: bytes | None = None) -> None:
        self._options = dict(options or {})
        self._state_key = state_key
        """The namespace's state key (Secret `sluice-state-key`): what a stored result must be sealed with
        before it is believed. None when the Secret is not there yet: then no run can have sealed one."""

    def _fs(self, uri: str) -> tuple[Any, str]:
        fs, path = fsspec.core.url_to_fs(uri, **self._options)
        return fs, path

    def _read(self, uri: str) -> bytes | None:
        fs, path = self._fs(uri)
        try:
            with fs.open(path, "rb") as handle:
                payload: bytes = handle.read()
        except FileNotFoundError:
            return None
        return payload

    async def job_result(self, checkpoint_dir: str, job_id: str) -> JobResult | None:
        """The stored end of run `job_id`, read as the coordinator reads it (`sluice_contract.results`).

        Raises DocumentError for a result the namespace's key sealed with a malformed field: the
        observation reports it rather than decide on a guess.
        """
        uri = f"{checkpoint_dir}/{job_id}/{RESULT_FILE}"
        payload = await asyncio.to_thread(self._read, uri)
        if payload is None:
            return None
        # A stored result ends the run for good: only one the run's coordinator sealed is believed, as the
        # coordinator itself does (docs/security.md). Anyone who can write to the bucket could plant one.
        if self._state_key is None:
            found: JobResult | Disbelieved = Disbelieved(
                "cannot be checked: the namespace has no state key Secret, so no run sealed it"
            )
        else:
            found = believed(payload, job_id, self._state_key, uri)
        if isinstance(found, Disbelieved):
            if (uri, found.why) not in _disbelieved:
                _disbelieved.add((uri, found.why))
                log.warning(
                    "%s %s, so it is not believed: run %s is treated as not ended", uri, found.why, job_id
                )
            return None
        return found

    async def snapshot(self, path: str) -> Snapshot | None:
        """The checkpoint or savepoint at `path`, None when it has no `_metadata`; a malformed one raises
        DocumentError naming the field."""
        location = path.rstrip("/")
        where = f"{location}/{METADATA}"
        payload = await asyncio.to_thread(self._read, where)
        return None if payload is None else _snapshot(location, decode_object(payload, where))

    async def latest_checkpoint(self, checkpoint_dir: str, job_id: str | None = None) -> Snapshot | None:
        """The newest restorable checkpoint under `checkpoint_dir`: of run `job_id` (by checkpoint number),
        or of any run (by `_metadata` timestamp).

        A damaged one (a state file missing or cut short) is passed over for the one before it, as the
        runtime does (`sluice_contract.checkpoints`); a run whose retained checkpoints are all damaged
        raises `NoRestorableCheckpoint` rather than let a new run start from an older restore point.
        """
        return await asyncio.to_thread(self._latest, checkpoint_dir, job_id)

    def _latest(self, checkpoint_dir: str, job_id: str | None) -> Snapshot | None:
        root = checkpoint_dir.rstrip("/")
        best: Snapshot | None = None
        for run in [job_id] if job_id else self._runs(root):
            found = latest_restorable(f"{root}/{run}", run, filesystems=self._fs, read=self._metadata)
            if found is None:
                continue
            snap = _snapshot(found.location, found.metadata)
            if best is None or (snap.timestamp or 0) > (best.timestamp or 0):
                best = snap
        return best

    def _runs(self, root: str) -> list[str]:
        fs, path = self._fs(root)
        # Listings are cached by some filesystems (s3fs); runs come and go between two reconciles.
        fs.invalidate_cache(path)
        try:
            entries = fs.ls(path, detail=True)
        except FileNotFoundError:
            return []
        return [
            str(e["name"]).rstrip("/").rsplit("/", 1)[-1] for e in entries if e.get("type") == "directory"
        ]

    def _metadata(self, location: str) -> dict[str, Any]:
        where = f"{location}/{METADATA}"
        fs, path = self._fs(where)
        with fs.open(path, "rb") as handle:
            data = decode_object(handle.read(), where)
        # Read here, so that one the operator cannot read is passed over as the runtime passes over one
        # it cannot: a DocumentError is the ValueError `latest_restorable` takes as damage.
        MetadataSummary.from_json(data, where)
        return data

    async def dispose(self, path: str) -> bool:
        """Delete a savepoint directory; False when it was already gone."""
        return await asyncio.to_thread(self._dispose, path)

    def _dispose(self, path: str) -> bool:
        fs, root = self._fs(path)
        if not fs.exists(root):
            return False
        fs.rm(root, recursive=True)
        return True


def _snapshot(location: str, data: Mapping[str, Any]) -> Snapshot:
    return Snapshot.of(location, MetadataSummary.from_json(data, f"{location}/{METADATA}"))
