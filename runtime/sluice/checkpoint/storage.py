"""Checkpoint and savepoint files in object storage (see docs/reference/storage-layout.md).

`_metadata` is written last and in one piece, so a directory without it is not a checkpoint and is
never restored from: a crash half way through a checkpoint leaves only ignorable state files behind.
For the same reason `discard` removes `_metadata` first: a discard cut short never leaves a `_metadata`
whose state files are gone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import re
import uuid

from fsspec.implementations.local import LocalFileSystem

from sluice._fs import filesystem, join, make_dirs, normalize
from sluice.checkpoint.integrity import INTEGRITY_FIELD, IntegrityError, Verdict, seal, verdict
from sluice.checkpoint.metadata import DIGESTS_SINCE, CheckpointMetadata
from sluice.checkpoint.state_key import StateKey
from sluice.state.stored_files import DigestingWriter, read_verified, sha256
from sluice_contract import checkpoints
from sluice_contract.checkpoints import METADATA, SHARED_DIR, NoRestorableCheckpoint
from sluice_contract.codec import decode_object

__all__ = ["CheckpointStorage", "NoRestorableCheckpoint"]

log = logging.getLogger(__name__)
_SHARED_FILE = re.compile(r"-(\d+)-[0-9a-f]+\.kv$")


def job_directory(checkpoint_dir: str, job_id: str) -> str:
    return join(normalize(checkpoint_dir), job_id)


class CheckpointStorage:
    def __init__(self, checkpoint_dir: str, job_id: str, key: StateKey) -> None:
        self.checkpoint_dir = normalize(checkpoint_dir)
        self.job_id = job_id
        self.job_dir = job_directory(checkpoint_dir, job_id)
        self.key = key
        """Authenticates the `_metadata` this job writes, and the ones it restores."""

    def checkpoint_location(self, checkpoint_id: int) -> str:
        return join(self.job_dir, f"chk-{checkpoint_id}")

    def savepoint_location(self, target_dir: str, checkpoint_id: int) -> str:
        # The whole job id: two jobs whose ids merely share a prefix must never write into (or, when
        # a savepoint fails, delete) one directory. The checkpoint id stays last; readers take it
        # from there.
        name = f"savepoint-{re.sub(r'[^A-Za-z0-9_.-]', '_', self.job_id)}-{checkpoint_id}"
        return join(normalize(target_dir), name)

    def probe_writable(self, location: str) -> None:
        """Fails with the storage's own error when `location` cannot be written."""
        fs, path = filesystem(location)
        make_dirs(fs, path)
        probe = f"{path}/.probe-{uuid.uuid4().hex}"
        with fs.open(probe, "wb") as handle:
            handle.write(b"ok")
        fs.rm(probe)

    def latest_completed(self) -> str | None:
        """The newest checkpoint of this job that has its authenticated `_metadata` and every state file
        it names (`sluice_contract.checkpoints.latest_restorable`, the operator's finder too).

        A damaged one is skipped with a warning for the one before it. When every retained one is
        damaged this raises `NoRestorableCheckpoint`: starting the job again from its beginning would
        have its two-phase-commit sinks commit their output a second time.
        """
        found = checkpoints.latest_restorable(
            self.job_dir,
            self.job_id,
            filesystems=filesystem,
            read=lambda location: read_metadata(location, self.key).to_json(),
            advice=self._advice,
        )
        return None if found is None else found.location

    def _advice(self, skipped: list[str]) -> str:
        """What to do when none of the retained checkpoints `skipped` can be restored: an upgrade leaves
        checkpoints refused only for want of a MAC, and those can be restored when told to."""
        before_macs = next((location for location in skipped if written_before_macs(location)), None)
        if before_macs is None:
            return _DAMAGE_ADVICE
        return (
            f"{before_macs} was written by a Sluice from before checkpoints were authenticated ({METADATA} "
            "version 2 or older, without a MAC), and only state this deployment's key authenticated is "
            "restored without being told. If nobody else can have written it, restore it as a new job: "
            f"`sluice run <pipeline> --job-id <a new id> --from-savepoint {before_macs} --trust-savepoint` "
            "(on Kubernetes: `spec.trustSavepoint: true` on the StreamJob); the checkpoints taken from "
            "then on carry this deployment's MAC"
        )

    def completed_ids(self) -> list[int]:
        return checkpoints.checkpoint_ids(self.job_dir, filesystem)


_DAMAGE_ADVICE = (
    "Resume it from a savepoint (--from-savepoint), or delete its checkpoint directory to start it afresh "
    "on purpose"
)


def written_before_macs(location: str) -> bool:
    """Whether the `_metadata` at `location` has the format of a Sluice that wrote no MAC (version < 3)
    and none: what an upgrade leaves behind, told apart from a MAC stripped off a newer one."""
    try:
        document = json.loads(_read_raw_metadata(location)[1])
    except (OSError, ValueError):
        return False
    version = document.get("version") if isinstance(document, dict) else None
    return (
        isinstance(version, int)
        and not isinstance(version, bool)
        and version < DIGESTS_SINCE
        and INTEGRITY_FIELD not in document
    )


def write_state_file(location: str, name: str, data: bytes) -> tuple[int, str]:
    """Writes a state file; returns its size and its SHA-256, for `_metadata`."""
    fs, path = filesystem(location)
    make_dirs(fs, path)
    with fs.open(f"{path}/{name}", "wb") as handle:
        out = DigestingWriter(handle)
        out.write(data)
    return len(data), out.hexdigest()


def read_state_file(location: str, name: str, digest: str | None) -> bytes:
    """A state file's bytes, once they matched the digest `_metadata` recorded (`stored_files`)."""
    uri = join(location, name)
    return read_verified(uri, digest, uri)


def exists(uri: str) -> bool:
    fs, path = filesystem(uri)
    return bool(fs.exists(path))


def write_metadata(location: str, metadata: CheckpointMetadata, key: StateKey) -> None:
    """Writes `_metadata` with its MAC (`sluice.checkpoint.integrity.seal`)."""
    fs, path = filesystem(location)
    make_dirs(fs, path)
    payload = json.dumps(seal(metadata.to_json(), key), indent=1, sort_keys=True).encode()
    if isinstance(fs, LocalFileSystem):
        # Local files: write aside and rename, so `_metadata` appears complete or not at all.
        tmp = f"{path}/.{METADATA}.{uuid.uuid4().hex}"
        with fs.open(tmp, "wb") as handle:
            handle.write(payload)
        fs.mv(tmp, f"{path}/{METADATA}")
    else:
        # Object stores publish an object only once its upload completes.
        with fs.open(f"{path}/{METADATA}", "wb") as handle:
            handle.write(payload)


def _read_raw_metadata(location: str) -> tuple[str, bytes]:
    uri = normalize(location)
    if uri.endswith("/" + METADATA):
        uri = uri[: -len(METADATA) - 1]
    if not exists(join(uri, METADATA)):
        raise FileNotFoundError(
            f"{uri} is not a completed checkpoint or savepoint: it has no {METADATA} file "
            "(the checkpoint never completed, or the path is wrong)"
        )
    return uri, read_state_file(uri, METADATA, None)


def read_metadata(location: str, key: StateKey, *, trust: bool = False) -> CheckpointMetadata:
    """The `_metadata` of the checkpoint or savepoint at `location` (its directory, or the file itself),
    once its MAC proved it was written with `key`. `trust`: the user vouched for it (a savepoint from
    another deployment, or from before MACs); it is then read with a warning whatever its MAC says.

    Raises FileNotFoundError when there is none, IntegrityError when its MAC does not prove it and it is
    not trusted, FormatError when it is malformed (both are ValueErrors).
    """
    uri, payload = _read_raw_metadata(location)
    document = decode_object(payload, f"{uri}/{METADATA}")
    found = verdict(document, key)
    if found is not Verdict.VALID:
        if not trust:
            raise IntegrityError(
                f"{uri}/{METADATA} {found.explain(key.key_id)}, so nothing it names is restored. A "
                "savepoint of another deployment can be restored with --trust-savepoint "
                "(spec.trustSavepoint on Kubernetes) once you know where it came from; a checkpoint of "
                "this job's own directory never is: restore another checkpoint or a savepoint"
            )
        log.warning(
            "restoring %s although its %s %s: --trust-savepoint says it comes from a source you trust",
            uri,
            METADATA,
            found.explain(key.key_id),
        )
    metadata = CheckpointMetadata.read(document, location=uri)
    return dataclasses.replace(metadata, digest=sha256(payload))


def read_pinned_metadata(location: str, digest: str) -> CheckpointMetadata:
    """The `_metadata` at `location` whose bytes have the SHA-256 `digest`: the one the coordinator
    checked and restores (TaskManagers hold no key; they read the very file the coordinator accepted)."""
    uri = normalize(location)
    payload = read_verified(join(uri, METADATA), digest, join(uri, METADATA))
    metadata = CheckpointMetadata.parse(payload, location=uri)
    return dataclasses.replace(metadata, digest=digest)


def damage(location: str, key: StateKey) -> str | None:
    """What keeps a checkpoint or savepoint with a `_metadata` from being restored, or None."""
    try:
        metadata = read_metadata(location, key)
    except (OSError, ValueError) as err:
        return f"its {METADATA} cannot be read ({type(err).__name__}: {err})"
    return checkpoints.damage(location, metadata.to_json(), filesystem)


def collect_shared(storage: CheckpointStorage, written_before: int) -> int:
    """Deletes the shared files no checkpoint left in storage refers to; returns how many.

    Only files written for checkpoints older than `written_before` (the oldest one still pending, or
    the next to come) are considered: newer ones may belong to a checkpoint not acknowledged yet.
    """
    referenced: set[str] = set()
    for cid in storage.completed_ids():
        location = storage.checkpoint_location(cid)
        try:
            # Not checked against the key: whatever any `_metadata` names is kept. One from before MACs
            # can still be restored with --trust-savepoint, and keeping too much costs only space.
            uri, payload = _read_raw_metadata(location)
            referenced |= CheckpointMetadata.parse(payload, uri).shared_names()
        except FileNotFoundError:
            continue  # no _metadata: not a checkpoint, nothing restores it
    fs, path = filesystem(join(storage.job_dir, SHARED_DIR))
    fs.invalidate_cache(path)  # TaskManagers write here, not this process: list afresh
    try:
        entries = fs.ls(path, detail=False)
    except FileNotFoundError:
        return 0
    removed = 0
    for entry in entries:
        name = entry.rstrip("/").rsplit("/", 1)[-1]
        match = _SHARED_FILE.search(name)
        if match is None or name in referenced or int(match.group(1)) >= written_before:
            continue
        with contextlib.suppress(FileNotFoundError):
            fs.rm(f"{path}/{name}")
            removed += 1
    return removed


def discard(location: str) -> None:
    """Deletes a checkpoint or savepoint directory, `_metadata` first."""
    fs, path = filesystem(location)
    with contextlib.suppress(FileNotFoundError):
        fs.rm(f"{path}/{METADATA}")
    # Nothing may have been written there, or an object store has no directory left.
    with contextlib.suppress(FileNotFoundError):
        fs.rm(path, recursive=True)
