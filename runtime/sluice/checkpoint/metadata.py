"""The `_metadata` file of a checkpoint or savepoint (docs/reference/storage-layout.md).

The coordinator writes it last, once every subtask acknowledged; restoring, restore validation and
retention of shared files read it, and the operator reads its head, the fields outside the state
handles (`sluice_contract.metadata.MetadataSummary`, whose stop mode reader this file uses too).
Whatever is read back is checked field by field: a `_metadata` comes from storage that other
processes, or people, can write. The records are documents of the contract's codec
(`sluice_contract.codec`); the checks a type cannot state are the field readers below, which the
checkpoint acknowledgement uses too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Self

from sluice._json import FormatError
from sluice._states import CheckpointKind, StopMode
from sluice.state.chain_files import KeyedFile, plain_name
from sluice.state.stored_files import digest_field
from sluice_contract.codec import Document, check, decode_object, is_empty, is_none, wire, wrong
from sluice_contract.metadata import STOP_MODE

METADATA_VERSION = 3
"""3: a SHA-256 per state file and a MAC over the whole (`sluice.checkpoint.integrity`); 2: keyed state
backend files (`keyedFiles`), shared between checkpoints; 1 and 2 are read from savepoints the user
trusts (`--trust-savepoint`)."""
READABLE_VERSIONS = (1, 2, 3)
DIGESTS_SINCE = 3


def state_file(value: Any, where: str, name: str) -> str:
    """A state file's name relative to the directory of `_metadata`: never a path that leaves it."""
    if not isinstance(value, str):
        raise wrong(where, name, value, "a string")
    if not value or "/" in value or "\\" in value or value in (".", "..") or not value.isprintable():
        raise wrong(where, name, value, "a plain file name")
    return value


def key_groups(value: Any, where: str, name: str) -> tuple[int, int]:
    """`[first, last]`, inclusive: the key groups of a keyed operator's subtask."""
    ok = (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in value)
        and value[0] <= value[1]
    )
    if not ok:
        raise wrong(where, name, value, "null or [first, last]")
    return value[0], value[1]


_MAX_PROTECTED = 64


def protected_files(value: Any, where: str, name: str) -> tuple[str, ...]:
    """Names of files under `shared/`: plain file names, a bounded number of them."""
    if not isinstance(value, list):
        raise wrong(where, name, value, "an array")
    if len(value) > _MAX_PROTECTED:
        raise FormatError(f"{where}: {name!r} lists {len(value)} files, at most {_MAX_PROTECTED}")
    try:
        return tuple(plain_name(n, "protected file name") for n in value)
    except ValueError as err:
        raise FormatError(f"{where}: {err}") from None


DIGEST = wire(read=digest_field, omit_when=is_none)
"""The SHA-256 of a state file, sent and stored only when there is a file."""
KEY_GROUPS = wire(read=key_groups)
PROTECTED_FILES = wire(read=protected_files, omit_when=is_empty)
_REQUIRED_COUNTS = wire(minimum=0, required=True)


@dataclass(frozen=True)
class SubtaskHandle(Document):
    """The state a running subtask of an operator checkpointed."""

    index: int = field(metadata=wire(minimum=0))
    path: str | None = field(metadata=wire(absent_is_null=True, read=state_file))
    """Its own state file (operator state, timers, keyed state of version 1), or None."""
    size: int = field(metadata=wire(minimum=0))
    key_groups: tuple[int, int] | None = field(default=None, metadata=KEY_GROUPS)
    """`(first, last)` key groups, inclusive, of a keyed operator's subtask."""
    operator_state: bool = True
    """Whether the state file holds operator (list, union, broadcast) state."""
    union: bool = False
    keyed_files: tuple[KeyedFile, ...] = field(default=(), metadata=wire(omit_when=is_empty))
    """The keyed state backend's chain of files, oldest (full) first."""
    protected_files: tuple[str, ...] = field(default=(), metadata=PROTECTED_FILES)
    """Files under `shared/` the subtask was still writing (a compaction): kept while this checkpoint
    is, never read by a restore."""
    sha256: str | None = field(default=None, metadata=DIGEST)
    """The digest of the state file at `path`, taken while it was written."""


@dataclass(frozen=True)
class PendingCommit(Document):
    """A finished subtask's transactions that the checkpoint's completion commits (2PC sinks)."""

    index: int = field(metadata=wire(minimum=0))
    path: str = field(metadata=wire(read=state_file))
    size: int = field(metadata=wire(minimum=0))
    sha256: str | None = field(default=None, metadata=DIGEST)


@dataclass(frozen=True)
class OperatorEntry(Document):
    uid: str
    parallelism: int = field(metadata=wire(minimum=1))
    max_parallelism: int = field(metadata=wire(minimum=1))
    fully_finished: bool
    """Every subtask had finished: no state, and the operator does not run again after a restore."""
    finished_subtasks: tuple[int, ...] = field(default=(), metadata=_REQUIRED_COUNTS)
    subtasks: tuple[SubtaskHandle, ...] = field(default=(), metadata=wire(required=True))
    pending_commits: tuple[PendingCommit, ...] = field(default=(), metadata=wire(omit_when=is_empty))
    """Only on a fully finished operator: what its final checkpoint still has to commit."""
    finished_inputs: tuple[int, ...] = field(default=(), metadata=wire(minimum=0, omit_when=is_empty))
    """Only on a running two-input operator (connect, joins): its inputs (0, 1) that had ended, their
    upstream fully finished; a restore does not run those again, and the operator keeps their state."""

    def handles(self) -> Iterator[SubtaskHandle | PendingCommit]:
        yield from self.subtasks
        yield from self.pending_commits


@dataclass(frozen=True)
class CheckpointMetadata(Document):
    checkpoint_id: int = field(metadata=wire(minimum=0))
    job_id: str
    kind: CheckpointKind
    timestamp: int
    """When the checkpoint was triggered, ms since the epoch."""
    stop_mode: StopMode | None = field(metadata=STOP_MODE)
    """The stop-with-savepoint this savepoint was taken for, or None (the job went on)."""
    operators: tuple[OperatorEntry, ...]
    version: int = field(default=METADATA_VERSION, metadata=wire(required=True))
    location: str = field(default="", metadata=wire(skip=True))
    """Where it was read from (not part of the file: a savepoint can be moved)."""
    digest: str = field(default="", metadata=wire(skip=True))
    """The SHA-256 of the `_metadata` bytes it was read from (not part of the file): the coordinator
    names it to the TaskManagers, which then read only the `_metadata` it checked."""

    @staticmethod
    def parse(payload: bytes | str, location: str = "") -> CheckpointMetadata:
        """Parses a `_metadata` file; a malformed one raises FormatError saying which field is wrong."""
        where = _where(location)
        return CheckpointMetadata.read(decode_object(payload, where), location)

    @staticmethod
    def read(document: Any, location: str = "") -> CheckpointMetadata:
        """The `_metadata` at `location`, already decoded (its MAC checked by the caller, or not)."""
        return replace(CheckpointMetadata.from_json(document, _where(location)), location=location)

    @classmethod
    def from_json(cls, data: Any, where: str = "") -> Self:
        where = where or "_metadata"
        # The version first: a newer format is told as such, not as the first field it changed.
        if isinstance(data, dict) and "version" in data:
            version = check(int, data["version"], where, "version")
            if version not in READABLE_VERSIONS:
                raise FormatError(
                    f"{where} has format version {version}; this Sluice reads versions "
                    f"{', '.join(map(str, READABLE_VERSIONS))} (it was written by a newer Sluice?)"
                )
        metadata = super().from_json(data, where)
        if metadata.version >= DIGESTS_SINCE and (missing := metadata.undigested()):
            raise FormatError(f"{where}: state file {missing} has no 'sha256'")
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


def _where(location: str) -> str:
    return f"{location or 'a'}/_metadata"
