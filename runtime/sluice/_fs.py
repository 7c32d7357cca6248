"""fsspec access by URI: a plain path means the local file system."""

from __future__ import annotations

from typing import Any

import fsspec


def filesystem(uri: str) -> tuple[Any, str]:
    """The file system of `uri` and the path inside it (no protocol prefix for local files)."""
    fs, path = fsspec.core.url_to_fs(uri)
    return fs, path


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
