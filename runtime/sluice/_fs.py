"""fsspec access by URI: a plain path means the local file system."""

from __future__ import annotations

from typing import Any

import fsspec


def filesystem(uri: str) -> tuple[Any, str]:
    """The file system of `uri` and the path inside it (no protocol prefix for local files)."""
    fs, path = fsspec.core.url_to_fs(uri)
    return fs, path


def join(uri: str, *parts: str) -> str:
    return "/".join([uri.rstrip("/"), *(p.strip("/") for p in parts)])


def normalize(uri: str) -> str:
    """A URI with an explicit protocol, so it means the same in every process."""
    if "://" in uri:
        return uri.rstrip("/")
    import os

    return "file://" + os.path.abspath(os.path.expanduser(uri))
