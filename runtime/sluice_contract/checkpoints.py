"""Which checkpoint a job restores from: one finder for the runtime and the operator.

The coordinator of a restarted job and the operator starting a new run of a job (a `last-state`
upgrade, docs/operator.md) must agree on it. Both pass over a damaged checkpoint, one whose `_metadata`
names a state file that is missing or shorter than written (docs/reference/storage-layout.md): restoring
it would fail, or worse, restore part of the state. When every retained checkpoint of a job is damaged
neither side starts the job from its beginning, which would have its two-phase-commit sinks commit
their output a second time.

How `_metadata` is read is the caller's: the coordinator authenticates it with the deployment's state
key (the operator holds none, and reads it as plain JSON; the new run's coordinator checks the key when
it restores). Storage is reached through fsspec-style file systems, passed in, not imported.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

METADATA = "_metadata"
"""Written last, in one piece: a checkpoint directory exists as a checkpoint iff this file exists."""
SHARED_DIR = "shared"
"""`<checkpoint-dir>/<job-id>/shared`: keyed state files shared between a job's checkpoints."""
_CHECKPOINT = re.compile(r"chk-(\d+)$")

FileSystems = Callable[[str], tuple[Any, str]]
"""A URI -> (its fsspec file system, the path inside it)."""
ReadMetadata = Callable[[str], Mapping[str, Any]]
"""A checkpoint's location -> its `_metadata`, as far as the reader trusts it; raises OSError or
ValueError when it cannot be read or trusted."""


class NoRestorableCheckpoint(RuntimeError):
    """A job has completed checkpoints in storage, and none of them can be restored."""


@dataclass(frozen=True)
class Restorable:
    location: str
    """`<checkpoint-dir>/<job-id>/chk-<n>`, with the protocol of the job directory it was found in."""
    checkpoint_id: int
    metadata: Mapping[str, Any]


@dataclass(frozen=True)
class StateFile:
    operator: str
    name: str
    size: int
    shared: bool
    """Under the job's shared directory, not the checkpoint's own."""


def checkpoint_location(job_dir: str, checkpoint_id: int) -> str:
    return f"{job_dir.rstrip('/')}/chk-{checkpoint_id}"


def shared_location(checkpoint_location: str) -> str:
    """`<checkpoint-dir>/<job-id>/shared` for the location `<checkpoint-dir>/<job-id>/chk-<n>`."""
    return f"{checkpoint_location.rstrip('/').rsplit('/', 1)[0]}/{SHARED_DIR}"


def checkpoint_ids(job_dir: str, filesystems: FileSystems) -> list[int]:
    """The numbers of the `chk-<n>` directories of a job, oldest first (with or without `_metadata`)."""
    fs, path = filesystems(job_dir)
    # TaskManagers and other coordinators write here: a listing some file systems (s3fs) cached would
    # miss the newest.
    fs.invalidate_cache(path)
    try:
        entries = fs.ls(path, detail=False)
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for e in entries if (m := _CHECKPOINT.search(str(e).rstrip("/"))))


def latest_restorable(
    job_dir: str,
    job_id: str,
    *,
    filesystems: FileSystems,
    read: ReadMetadata,
    advice: Callable[[list[str]], str] | None = None,
) -> Restorable | None:
    """The newest checkpoint of the job in `job_dir` that has its `_metadata` and every state file it
    names, or None when it has no completed checkpoint.

    A damaged one is passed over with a warning for the one before it. When every one is damaged this
    raises `NoRestorableCheckpoint`, ending with `advice(the locations passed over)` when given: each side
    says its own way out (the runtime names CLI flags, the operator the StreamJob's).
    """
    skipped: list[str] = []
    for checkpoint_id in reversed(checkpoint_ids(job_dir, filesystems)):
        location = checkpoint_location(job_dir, checkpoint_id)
        fs, path = filesystems(location)
        if not fs.exists(f"{path}/{METADATA}"):
            continue  # never completed, or being discarded: not a checkpoint
        try:
            metadata = read(location)
        except (OSError, ValueError) as err:
            problem: str | None = f"its {METADATA} cannot be read ({type(err).__name__}: {err})"
        else:
            problem = damage(location, metadata, filesystems)
        if problem is None:
            if skipped:
                log.warning(
                    "restoring %s instead of the newer %s: output that two-phase-commit sinks "
                    "committed after it is written again",
                    location,
                    ", ".join(skipped),
                )
            return Restorable(location, checkpoint_id, metadata)
        log.warning("checkpoint %s cannot be restored: %s", location, problem)
        skipped.append(location)
    if skipped:
        raise NoRestorableCheckpoint(
            f"no retained checkpoint of job {job_id} can be restored ({', '.join(skipped)}: "
            "see the warnings above); the job is not started again from an earlier point, which would "
            "write output its sinks already committed a second time"
            + ("" if advice is None else f". {advice(skipped)}")
        )
    return None


def damage(location: str, metadata: Mapping[str, Any], filesystems: FileSystems) -> str | None:
    """What keeps the checkpoint or savepoint at `location`, with this `_metadata`, from being restored:
    a state file it names missing or of another size than written; None when there is nothing."""
    try:
        files = list(state_files(metadata))
    except ValueError as err:
        return f"its {METADATA} is malformed: {err}"
    fs, path = filesystems(location)
    shared = filesystems(shared_location(location))[1]
    # TaskManagers wrote these files: a directory listing this process cached (s3fs keeps them) would
    # call the newest of them missing.
    fs.invalidate_cache(shared)
    fs.invalidate_cache(path)
    for file in files:
        try:
            info = fs.info(f"{shared if file.shared else path}/{file.name}")
        except FileNotFoundError:
            return f"state file {file.name} of operator {file.operator!r} is missing"
        if info.get("type", "file") != "file":
            # A FIFO, a device or a directory in its place: Sluice writes none of them, and reading one
            # could hang the restore.
            return f"state file {file.name} of operator {file.operator!r} is not a regular file"
        size = info.get("size")
        if size != file.size:
            return (
                f"state file {file.name} of operator {file.operator!r} has {size} bytes, "
                f"{file.size} were written"
            )
    return None


def state_files(metadata: Mapping[str, Any]) -> Iterator[StateFile]:
    """Every state file a `_metadata` names. It comes from storage: a field of the wrong shape raises
    ValueError naming it, and a name that is not a plain file name (one that would reach outside the
    checkpoint) is refused."""
    for i, operator in enumerate(_objects(metadata, "operators", "")):
        where = f"operators[{i}]"
        uid = operator.get("uid")
        if not isinstance(uid, str):
            raise ValueError(f"{where}.uid must be a string, not {uid!r}")
        for key in ("subtasks", "pendingCommits"):
            for j, handle in enumerate(_objects(operator, key, where)):
                at = f"{where}.{key}[{j}]"
                if handle.get("path") is not None:
                    yield StateFile(uid, _name(handle, "path", at), _size(handle, at), shared=False)
                for k, ref in enumerate(_objects(handle, "keyedFiles", at)):
                    file_at = f"{at}.keyedFiles[{k}]"
                    shared = ref.get("shared", False)
                    if not isinstance(shared, bool):
                        raise ValueError(f"{file_at}.shared must be true or false, not {shared!r}")
                    yield StateFile(uid, _name(ref, "name", file_at), _size(ref, file_at), shared)


def _objects(parent: Mapping[str, Any], key: str, where: str) -> Iterator[Mapping[str, Any]]:
    items = parent.get(key)
    if items is None:
        return
    named = f"{where}.{key}" if where else key
    if not isinstance(items, list):
        raise ValueError(f"{named} must be a list, not {type(items).__name__}")
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ValueError(f"{named}[{i}] must be an object, not {type(item).__name__}")
        yield item


def _name(entry: Mapping[str, Any], key: str, where: str) -> str:
    value = entry.get(key)
    # The rule of the names the runtime writes (`<uid>-<subtask>.state`; a uid has no '/'): nothing
    # that leaves the directory it is named relative to.
    if (
        not isinstance(value, str)
        or value in ("", ".", "..")
        or not value.isprintable()
        or "/" in value
        or "\\" in value
    ):
        raise ValueError(f"{where}.{key} must be a plain file name, not {value!r}")
    return value


def _size(entry: Mapping[str, Any], where: str) -> int:
    value = entry.get("size")
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{where}.size must be a whole number of bytes, not {value!r}")
    return value
