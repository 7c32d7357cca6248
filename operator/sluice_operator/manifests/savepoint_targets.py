"""Where a `Savepoint` may write: the job's own savepoint and checkpoint directories, and the prefixes the
operator's configuration allows (`SLUICE_OPERATOR_ALLOWED_SAVEPOINT_PREFIXES`, Helm value
`operator.allowedSavepointPrefixes`).

The coordinator enforces the same list (the operator passes the configured prefixes as
`--savepoint-dir-allow`); the operator checks first so that a refused target is a clear Savepoint status
naming the allowed prefixes, not a 400 from the REST API. A savepoint is written with the job's storage
credentials, so whoever may create a `Savepoint` must not be able to point it anywhere those credentials
reach.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from sluice_operator.models import OperatorConfig, StreamJobSpec

from ._common import Owner
from .run import checkpoint_dir, savepoint_dir


def _split(uri: str) -> tuple[str, str]:
    scheme, sep, rest = uri.strip().partition("://")
    if not sep:  # a plain absolute path is a local file path, as fsspec reads it
        scheme, rest = "file", uri.strip()
    return scheme.lower(), posixpath.normpath(rest) if rest else ""


def allowed_savepoint_prefixes(spec: StreamJobSpec, owner: Owner, config: OperatorConfig) -> list[str]:
    """The job's savepoint directory, its checkpoint storage, then the operator's configured prefixes."""
    prefixes = [savepoint_dir(spec, owner, config), checkpoint_dir(spec, owner, config)]
    prefixes += [p for p in config.allowed_savepoint_prefixes if p not in prefixes]
    return prefixes


def target_refusal(target: str, prefixes: Iterable[str]) -> str | None:
    """None if `target` is under one of `prefixes` (on a path boundary, `..` resolved); else why not."""
    shown = list(prefixes)
    scheme, path = _split(target)
    if path not in ("", ".", "/"):
        for allowed_scheme, allowed in map(_split, shown):
            boundary = allowed.rstrip("/") + "/"
            if scheme == allowed_scheme and (path == allowed or path.startswith(boundary)):
                return None
    return (
        f"targetDirectory {target!r} is not under an allowed savepoint location ({', '.join(shown)}). "
        "Use one of those, or ask the operator's administrator to add the prefix "
        "(Helm value operator.allowedSavepointPrefixes)"
    )
