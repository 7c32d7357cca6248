"""The files of keyed state chains: what one file holds, where it lives, how it is written and read.

A file is a sequence of pickle frames, each small enough that the serializing thread gives the task's
thread the GIL often: a header, then `(state name, kind, {key: value}, [removed keys])` chunks. Within
one file a key appears at most once (in a frame's entries or in its removed keys), which is what lets
`sluice.state.compaction` merge a chain newest file first.

Files written for checkpoints are *shared*: they live under `<checkpoint-dir>/<job-id>/shared/`, named
`<stem>-<checkpoint id>-<hex>.kv`; the coordinator reads the checkpoint id back from the name when it
collects the files no checkpoint refers to (`sluice.checkpoint.storage.collect_shared`). A savepoint's
files live beside its `_metadata`.
"""

from __future__ import annotations

import pickle
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from sluice._fs import join
from sluice.state.stored_files import digest_field, open_verified
from sluice_contract.checkpoints import shared_location
from sluice_contract.codec import Document, DocumentError, is_none, wire

FORMAT = "sluice-keyed-state"
CHUNK = 16_384
"""Entries per frame."""
_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")

Frame = tuple[str, str, dict[Any, Any], list[Any]]
"""(state name, kind, {key: value}, [removed keys])"""


def plain_name(name: Any, what: str) -> str:
    """Checks a file name read from an acknowledgement or a stored `_metadata`: no path, no dot first."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        shown = repr(name)  # bounded: the name may be anything a stranger wrote
        raise ValueError(
            f"{what} {shown if len(shown) <= 60 else shown[:57] + '...'} is not a plain file name"
        )
    return name


def _name_field(value: Any, where: str, name: str) -> str:
    try:
        return plain_name(value, "keyed state file name")
    except ValueError as err:
        raise DocumentError(f"{where}: {err}") from None


@dataclass(frozen=True)
class KeyedFile(Document):
    """One file of a chain. `shared` files are named under the job's shared directory; the others
    (a savepoint's) relative to the directory of `_metadata`. A TaskManager's acknowledgement and a
    stored `_metadata` name them: read back, the name is a plain file name, never a path."""

    name: str = field(metadata=wire(read=_name_field))
    size: int = field(metadata=wire(minimum=0))
    full: bool = False
    shared: bool = False
    sha256: str | None = field(default=None, metadata=wire(read=digest_field, omit_when=is_none))
    """The file's digest, taken while it was written; None only in files written before digests."""


def file_uri(location: str, ref: KeyedFile) -> str:
    return join(shared_location(location), ref.name) if ref.shared else join(location, ref.name)


def header(full: bool) -> dict[str, Any]:
    return {"format": FORMAT, "version": 1, "full": full}


class Sink(Protocol):
    def write(self, data: bytes, /) -> int: ...


class Batched:
    """Collects frames and writes them a few MiB at a time. Each write lets go of the GIL, and getting
    it back from a busy task thread takes up to a switch interval (5 ms): a write per frame made that
    wait most of a delta's writing time."""

    _LIMIT = 8 << 20

    def __init__(self, out: Sink) -> None:
        self._out = out
        self._frames: list[bytes] = []
        self._size = 0

    def write(self, data: bytes) -> None:
        self._frames.append(data)
        self._size += len(data)
        if self._size >= self._LIMIT:
            self.flush()

    def flush(self) -> None:
        if self._frames:
            self._out.write(b"".join(self._frames))
            self._frames, self._size = [], 0


def dump(out: Batched, frame: Any) -> int:
    """Writes one frame (or the header); returns its size in bytes."""
    data = pickle.dumps(frame, protocol=5)
    out.write(data)
    return len(data)


def read_frames(uri: str, sha256: str | None) -> Iterator[Frame]:
    """The frames of the file at `uri`, once all of it matched `sha256` (`stored_files.open_verified`)."""
    with open_verified(uri, sha256, uri) as handle:
        head = pickle.load(handle)
        if not isinstance(head, dict) or head.get("format") != FORMAT:
            raise ValueError(f"{uri} is not a Sluice keyed state file")
        while True:
            try:
                frame = pickle.load(handle)
            except EOFError:
                return
            yield frame
