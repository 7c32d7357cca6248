"""fsspec access by URI: a plain path means the local file system.

Every file Sluice writes goes through here: checkpoint and savepoint state files, `_metadata`,
`job-result.json`, the file sink's in-progress and committed parts. On the local file system they are
written 0600 and the directories Sluice makes are 0700 (`PrivateLocalFileSystem`): checkpoints hold the
job's state, pickled, and another local user must neither read them nor put anything in their place. A
file is never opened for writing through a symbolic link planted where it goes. Object stores keep
their own access control.
"""

from __future__ import annotations

import os
import stat
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileOpener, LocalFileSystem

FILE_MODE = 0o600
DIRECTORY_MODE = 0o700

S3_CLIENT_CONFIG: dict[str, Any] = {
    "connect_timeout": 5,
    "read_timeout": 30,
    "retries": {"max_attempts": 3, "mode": "standard"},
}
"""botocore's settings for every S3 call: a store that stops answering fails the call (s3fs retries it
a few times more) instead of holding a `_metadata` write, and with it the job's next attempt
(`CheckpointCoordinator.settle`), forever. Stated here rather than left to s3fs's defaults."""


def filesystem(uri: str) -> tuple[Any, str]:
    """The file system of `uri` and the path inside it (no protocol prefix for local files)."""
    options = {"config_kwargs": S3_CLIENT_CONFIG} if uri.startswith(("s3://", "s3a://")) else {}
    fs, path = fsspec.core.url_to_fs(uri, **options)
    if type(fs) is LocalFileSystem:
        fs = PrivateLocalFileSystem()
    return fs, path


class PrivateLocalFileSystem(LocalFileSystem):  # type: ignore[misc]
    """The local file system, with new files 0600 and new directories 0700, links not followed on write."""

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        path = self._strip_protocol(path)
        missing = []
        parent = path
        while not os.path.lexists(parent):
            missing.append(parent)
            parent = os.path.dirname(parent)
        if not missing and not exist_ok:
            raise FileExistsError(path)
        # os.makedirs gives its mode to the last directory only: each missing one is made here.
        for directory in reversed(missing):
            try:
                os.mkdir(directory, DIRECTORY_MODE)
            except FileExistsError:
                if not exist_ok and directory == path:
                    raise
        if not os.path.isdir(path):
            raise NotADirectoryError(f"{path} exists and is not a directory")

    def _open(self, path: str, mode: str = "rb", block_size: int | None = None, **kwargs: Any) -> Any:
        path = self._strip_protocol(path)
        if self.auto_mkdir and any(flag in mode for flag in "wxa"):
            self.makedirs(self._parent(path), exist_ok=True)
        return _PrivateFileOpener(path, mode, fs=self, **kwargs)


class _PrivateFileOpener(LocalFileOpener):  # type: ignore[misc]
    f: Any

    def _open(self) -> None:
        if not (self.f is None or self.f.closed) or not self.autocommit or "r" in self.mode:
            # Reads, and uncommitted writes (a mkstemp file, 0600 already, moved into place later).
            super()._open()
            return
        flags = os.O_CREAT | os.O_NOFOLLOW | (os.O_RDWR if "+" in self.mode else os.O_WRONLY)
        flags |= os.O_APPEND if "a" in self.mode else os.O_EXCL if "x" in self.mode else os.O_TRUNC
        fd = os.open(self.path, flags, FILE_MODE)
        try:
            # open keeps the mode of a file that was there, and the umask cuts; a device stays as it is.
            if stat.S_ISREG(os.fstat(fd).st_mode):
                os.fchmod(fd, FILE_MODE)
            self.f = os.fdopen(fd, self.mode)
        except BaseException:
            os.close(fd)
            raise
        if self.compression:
            from fsspec.compression import compr

            self.f = compr[self.compression](self.f, mode=self.mode)


def make_dirs(fs: Any, path: str) -> None:
    """Create the directory `path` where directories exist; object stores have none.

    s3fs's makedirs creates the *bucket* when it is missing: a mistyped bucket in a checkpoint or
    savepoint URI would silently become a new bucket (or fail later on a permission nobody expected).
    Writing into a missing bucket fails instead, with the store's own "no such bucket" error.
    """
    if not _is_object_store(fs):
        fs.makedirs(path, exist_ok=True)


def _is_object_store(fs: Any) -> bool:
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    return bool(set(protocols) & {"s3", "s3a", "gs", "gcs", "abfs", "az", "adl"})


def join(uri: str, *parts: str) -> str:
    return "/".join([uri.rstrip("/"), *(p.strip("/") for p in parts)])


def normalize(uri: str) -> str:
    """A URI with an explicit protocol, so it means the same in every process."""
    if "://" in uri:
        return uri.rstrip("/")
    import os

    return "file://" + os.path.abspath(os.path.expanduser(uri))
