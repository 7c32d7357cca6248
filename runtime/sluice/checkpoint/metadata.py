"""The `_metadata` file of a checkpoint or savepoint (docs/reference/storage-layout.md).

The coordinator writes it last, once every subtask acknowledged; restoring, restore validation,
retention of shared files and the operator (its own copy) read it. Whatever is read back is checked
field by field: a `_metadata` comes from storage that other processes, or people, can write.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sluice._json import Fields, FormatError, parse_object
from sluice._states import CheckpointKind, StopMode
from sluice.state.chain_files import KeyedFile, plain_name
from sluice.state.stored_files import is_digest

METADATA_VERSION = 3
"""3: a SHA-256 per state file and a MAC over the whole (`sluice.checkpoint.integrity`); 2: keyed state
backend files (`keyedFiles`), shared between checkpoints; 1 and 2 are read from savepoints the user
trusts (`--trust-savepoint`)."""
READABLE_VERSIONS = (1, 2, 3)
DIGESTS_SINCE = 3


def file_name(fields: Fields, name: str) -> str:
    """A state file's name relative to the directory of `_metadata`: never a path that leaves it."""
    value = fields.text(name)
    if not value or "/" in value or "\\" in value or value in (".", "..") or not value.isprintable():
        raise FormatError(f"{fields.where}: {name!r} must be a plain file name, not {value!r}")
    return value


def digest_of(fields: Fields, name: str = "sha256") -> str | None:
    value = fields.data.get(name)
    if value is not None and not is_digest(value):
        raise FormatError(f"{fields.where}: {name!r} must be 64 lowercase hexadecimal digits, not {value!r}")
    return value if isinstance(value, str) else None


def key_groups_of(fields: Fields) -> tuple[int, int] | None:
    value = fields.data.get("keyGroups")
    if value is None:
        return None
    ok = (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in value)
        and value[0] <= value[1]
    )
    if not ok:
        raise FormatError(f"{fields.where}: 'keyGroups' must be null or [first, last], not {value!r}")
    return value[0], value[1]


def keyed_files_of(fields: Fields) -> tuple[KeyedFile, ...]:
    try:
        return tuple(KeyedFile.from_json(f) for f in fields.array("keyedFiles", []))
    except ValueError as err:
        raise FormatError(f"{fields.where}: {err}") from None


_MAX_PROTECTED = 64


def protected_files_of(fields: Fields) -> tuple[str, ...]:
    names = fields.array("protectedFiles", [])
    if len(names) > _MAX_PROTECTED:
        raise FormatError(
            f"{fields.where}: 'protectedFiles' lists {len(names)} files, at most {_MAX_PROTECTED}"
        )
    try:
        return tuple(plain_name(name, "protected file name") for name in names)
    except ValueError as err:
        raise FormatError(f"{fields.where}: {err}") from None


@dataclass(frozen=True)
class SubtaskHandle:
    """The state a running subtask of an operator checkpointed."""

    index: int
    path: str | None
    """Its own state file (operator state, timers, keyed state of version 1), or None."""
    size: int
    key_groups: tuple[int, int] | None = None
    """`(first, last)` key groups, inclusive, of a keyed operator's subtask."""
    operator_state: bool = True
    """Whether the state file holds operator (list, union, broadcast) state."""
    union: bool = False
    keyed_files: tuple[KeyedFile, ...] = ()
    """The keyed state backend's chain of files, oldest (full) first."""
    protected_files: tuple[str, ...] = ()
    """Files under `shared/` the subtask was still writing (a compaction): kept while this checkpoint
    is, never read by a restore."""
    sha256: str | None = None
    """The digest of the state file at `path`, taken while it was written."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "path": self.path,
            "size": self.size,
            "keyGroups": None if self.key_groups is None else list(self.key_groups),
            "operatorState": self.operator_state,
            "union": self.union,
        }
        if self.sha256 is not None:
            out["sha256"] = self.sha256
        if self.keyed_files:
            out["keyedFiles"] = [f.as_json() for f in self.keyed_files]
        if self.protected_files:
            out["protectedFiles"] = list(self.protected_files)
        return out

    @staticmethod
    def from_json(fields: Fields) -> SubtaskHandle:
        return SubtaskHandle(
            index=fields.integer("index", minimum=0),
            path=None if fields.data.get("path") is None else file_name(fields, "path"),
            size=fields.integer("size", minimum=0),
            key_groups=key_groups_of(fields),
            operator_state=fields.flag("operatorState", True),
            union=fields.flag("union", False),
            keyed_files=keyed_files_of(fields),
            protected_files=protected_files_of(fields),
            sha256=digest_of(fields),
        )


@dataclass(frozen=True)
class PendingCommit:
    """A finished subtask's transactions that the checkpoint's completion commits (2PC sinks)."""

    index: int
    path: str
    size: int
    sha256: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "path": self.path, "size": self.size}
        if self.sha256 is not None:
            out["sha256"] = self.sha256
        return out

    @staticmethod
    def from_json(fields: Fields) -> PendingCommit:
        return PendingCommit(
            fields.integer("index", minimum=0),
            file_name(fields, "path"),
            fields.integer("size", minimum=0),
            digest_of(fields),
        )


@dataclass(frozen=True)
class OperatorEntry:
    uid: str
    parallelism: int
    max_parallelism: int
    fully_finished: bool
    """Every subtask had finished: no state, and the operator does not run again after a restore."""
    finished_subtasks: tuple[int, ...] = ()
    subtasks: tuple[SubtaskHandle, ...] = ()
    pending_commits: tuple[PendingCommit, ...] = ()
    """Only on a fully finished operator: what its final checkpoint still has to commit."""
    finished_inputs: tuple[int, ...] = ()
    """Only on a running two-input operator (connect, joins): its inputs (0, 1) that had ended, their
    upstream fully finished; a restore does not run those again, and the operator keeps their state."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "uid": self.uid,
            "parallelism": self.parallelism,
            "maxParallelism": self.max_parallelism,
            "fullyFinished": self.fully_finished,
            "finishedSubtasks": list(self.finished_subtasks),
            "subtasks": [h.to_json() for h in self.subtasks],
        }
        if self.pending_commits:
            out["pendingCommits"] = [c.to_json() for c in self.pending_commits]
        if self.finished_inputs:
            out["finishedInputs"] = list(self.finished_inputs)
        return out

    @staticmethod
    def from_json(fields: Fields) -> OperatorEntry:
        return OperatorEntry(
            uid=fields.text("uid"),
            parallelism=fields.integer("parallelism", minimum=1),
            max_parallelism=fields.integer("maxParallelism", minimum=1),
            fully_finished=fields.flag("fullyFinished"),
            finished_subtasks=tuple(fields.integers("finishedSubtasks")),
            subtasks=tuple(SubtaskHandle.from_json(f) for f in fields.objects("subtasks")),
            pending_commits=tuple(PendingCommit.from_json(f) for f in fields.objects("pendingCommits", [])),
            finished_inputs=tuple(fields.integers("finishedInputs", [])),
        )

    def handles(self) -> Iterator[SubtaskHandle | PendingCommit]:
        yield from self.subtasks
        yield from self.pending_commits


@dataclass(frozen=True)
class CheckpointMetadata:
    checkpoint_id: int
    job_id: str
    kind: CheckpointKind
    timestamp: int
    """When the checkpoint was triggered, ms since the epoch."""
    stop_mode: StopMode | None
    """The stop-with-savepoint this savepoint was taken for, or None (the job went on)."""
    operators: tuple[OperatorEntry, ...]
    version: int = METADATA_VERSION
    location: str = ""
    """Where it was read from (not part of the file: a savepoint can be moved)."""
    digest: str = ""
    """The SHA-256 of the `_metadata` bytes it was read from (not part of the file): the coordinator
    names it to the TaskManagers, which then read only the `_metadata` it checked."""

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "checkpointId": self.checkpoint_id,
            "jobId": self.job_id,
            "kind": self.kind,
            "timestamp": self.timestamp,
            "stopMode": None if self.stop_mode is None else self.stop_mode.in_metadata,
            "operators": [op.to_json() for op in self.operators],
        }

    @staticmethod
    def from_json(payload: bytes | str, location: str = "") -> CheckpointMetadata:
        """Parses a `_metadata` file; a malformed one raises FormatError saying which field is wrong."""
        return CheckpointMetadata.from_fields(parse_object(payload, f"{location or 'a'}/_metadata"), location)

    @staticmethod
    def from_fields(fields: Fields, location: str = "") -> CheckpointMetadata:
        version = fields.integer("version")
        if version not in READABLE_VERSIONS:
            raise FormatError(
                f"{fields.where} has format version {version}; this Sluice reads versions "
                f"{', '.join(map(str, READABLE_VERSIONS))} (it was written by a newer Sluice?)"
            )
        stop_mode = fields.optional_text("stopMode")
        try:
            mode = None if stop_mode is None else StopMode.from_metadata(stop_mode)
        except ValueError as err:
            raise FormatError(f"{fields.where}: {err}") from None
        metadata = CheckpointMetadata(
            checkpoint_id=fields.integer("checkpointId", minimum=0),
            job_id=fields.text("jobId"),
            kind=fields.choice("kind", CheckpointKind),
            timestamp=fields.integer("timestamp"),
            stop_mode=mode,
            operators=tuple(OperatorEntry.from_json(f) for f in fields.objects("operators")),
            version=version,
            location=location,
        )
        if version >= DIGESTS_SINCE and (missing := metadata.undigested()):
            raise FormatError(f"{fields.where}: state file {missing} has no 'sha256'")
        return metadata

    def undigested(self) -> str | None:
        """A state file this checkpoint names without its digest, or None."""
        for op in self.operators:
            for handle in op.handles():
                if handle.path is not None and handle.sha256 is None:
                    return handle.path
                if isinstance(handle, SubtaskHandle):
                    for ref in handle.keyed_files:
                        if ref.sha256 is None:
                            return ref.name
        return None

    def operator(self, uid: str) -> OperatorEntry | None:
        return next((op for op in self.operators if op.uid == uid), None)

    def shared_names(self) -> set[str]:
        """The files under the job's shared directory that this checkpoint refers to or protects."""
        names = {f.name for op in self.operators for h in op.subtasks for f in h.keyed_files if f.shared}
        return names | {name for op in self.operators for h in op.subtasks for name in h.protected_files}
