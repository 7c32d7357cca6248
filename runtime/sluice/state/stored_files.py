"""State files read back from a checkpoint: checked against the SHA-256 recorded for them first.

A state file's digest is computed while it is written (`DigestingWriter`), never by reading it again.
What vouches for the digest is the `_metadata` that records it, authenticated by the deployment's
key (`sluice.checkpoint.integrity`).

On local storage a state file is opened without following symlinks, must belong to this user and not
be writable by all users, and is checked and then unpickled through the same open file: neither a
symlink nor a swap between checking and reading gets past. It is opened without waiting, so a FIFO or
device put in its place is refused rather than hanging the restore. From object stores it is copied into an
anonymous temporary file while hashed, and read from that copy.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from typing import Any, BinaryIO, Protocol

from fsspec.implementations.local import LocalFileSystem

from sluice._fs import filesystem
from sluice_contract.codec import wrong

_CHUNK = 1 << 20


class IntegrityError(ValueError):
    """A stored file is not what its checkpoint recorded; the message names it and what to do."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_DIGEST = re.compile(r"[0-9a-f]{64}")


def is_digest(value: Any) -> bool:
    return isinstance(value, str) and _DIGEST.fullmatch(value) is not None


def digest_field(value: Any, where: str, name: str) -> str:
    """A recorded digest, read by the contract's codec (`wire(read=digest_field)`)."""
    if not is_digest(value):
        raise wrong(where, name, value, "64 lowercase hexadecimal digits")
    return str(value)


class _Sink(Protocol):
    def write(self, data: bytes, /) -> int: ...


class DigestingWriter:
    """Writes through to `out` and hashes what passes: the digest costs no second read of the file.
    hashlib lets go of the GIL for large buffers, so the task's thread is not held up either."""

    def __init__(self, out: _Sink) -> None:
        self._out = out
        self._hash = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self._hash.update(data)
        return self._out.write(data)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


@contextlib.contextmanager
def open_verified(uri: str, digest: str | None, shown: str) -> Iterator[BinaryIO]:
    """`uri` opened for reading once its content matches `digest` (None: a savepoint the user trusted
    that recorded none). `shown` names the file in errors."""
    fs, path = filesystem(uri)
    if isinstance(fs, LocalFileSystem):
        handle: BinaryIO = _open_local(path, shown)
    else:
        handle = tempfile.TemporaryFile()  # noqa: SIM115 - returned open, closed below
        try:
            with fs.open(path, "rb") as remote:
                while chunk := remote.read(_CHUNK):
                    handle.write(chunk)
        except BaseException:
            handle.close()
            raise
    with handle:
        if digest is not None:
            _check(handle, digest, shown)
        handle.seek(0)
        yield handle


def read_verified(uri: str, digest: str | None, shown: str) -> bytes:
    with open_verified(uri, digest, shown) as handle:
        return handle.read()


def _open_local(path: str, shown: str) -> BinaryIO:
    # O_NONBLOCK: opening a FIFO planted in the file's place would otherwise wait for a writer forever,
    # and the restore with it. The type is then checked on the descriptor itself (fstat), never with a
    # stat before the open that the file could be swapped after.
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise IntegrityError(f"state file {shown} is missing") from None
    except OSError as err:
        if os.path.islink(path):
            raise IntegrityError(
                f"state file {shown} is a symbolic link; Sluice writes none, so it was put there: "
                "the checkpoint is not restored. Restore another one, or a savepoint"
            ) from None
        raise IntegrityError(f"state file {shown} cannot be opened: {err}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise IntegrityError(
            f"state file {shown} is {_kind(info.st_mode)}, not a regular file; Sluice writes none, so it "
            "was put there: the checkpoint is not restored. Restore another one, or a savepoint"
        )
    os.set_blocking(fd, True)  # a regular file: reads behave the same, but nothing relies on that
    handle = os.fdopen(fd, "rb")
    problem = None
    if info.st_uid != os.getuid() or info.st_mode & 0o002:
        # Its owner, or anyone, could change it between the check and the read. (Group write is left
        # alone: with a group per user, as many systems make files, the group is the user.)
        problem = "belongs to another user or is writable by anyone"
    if problem is not None:
        handle.close()
        raise IntegrityError(f"state file {shown} {problem}: the checkpoint is not restored")
    return handle


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
    )
    return next((name for test, name in kinds if test(mode)), "a special file")


def _check(handle: BinaryIO, digest: str, shown: str) -> None:
    hashed = hashlib.sha256()
    handle.seek(0)
    while chunk := handle.read(_CHUNK):
        hashed.update(chunk)
    if hashed.hexdigest() != digest:
        raise IntegrityError(
            f"state file {shown} does not match the SHA-256 its checkpoint recorded: it was changed "
            "after it was written, and nothing of it is read. Restore another checkpoint or a "
            "savepoint, and find out who can write the checkpoint directory"
        )
