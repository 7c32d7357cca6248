"""The deployment's state key: what authenticates the `_metadata` of its checkpoints and savepoints.

One key per deployment, so that a savepoint moves between the jobs of one deployment and a checkpoint
or savepoint from anywhere else (a planted directory, another deployment) is not restored unless the
user says so (`--trust-savepoint`). Locally the key is a file only the user can read, created on first
use under the user's configuration directory; on Kubernetes the operator keeps it in a Secret mounted
into the coordinator's pod. Only the coordinator reads it: TaskManagers, which run user code, check
state files against digests the coordinator vouched for (`sluice.checkpoint.integrity`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

from sluice_contract.integrity import key_id as contract_key_id

KEY_FILE_ENV = "SLUICE_STATE_KEY_FILE"
"""The key file to use instead of the default one (`sluice run --state-key-file` sets it)."""
KEY_BYTES = 32


class StateKeyError(RuntimeError):
    """The key file cannot be used; the message says why and how to fix it."""


@dataclass(frozen=True)
class StateKey:
    secret: bytes = field(repr=False)

    @property
    def key_id(self) -> str:
        """Names the key in `_metadata` and in messages without revealing it."""
        return contract_key_id(self.secret)


def default_key_file() -> Path:
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(config) / "sluice" / "state.key"


def load_state_key(path: str | None = None) -> StateKey:
    """The key in `path`, else in `$SLUICE_STATE_KEY_FILE`, else in the default file (made when missing).

    A key file given explicitly must exist: a mistyped path must not quietly become a new key, whose
    checkpoints the real deployment would then refuse.
    """
    explicit = path or os.environ.get(KEY_FILE_ENV)
    if explicit:
        return _read(Path(explicit))
    default = default_key_file()
    _private_directory(default.parent)
    with contextlib.suppress(FileExistsError):
        _create(default)
    return _read(default, made_here=True)


def _private_directory(directory: Path) -> None:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise StateKeyError(
            f"{directory} must be a directory of yours that only you can open (mode 0700), since it "
            f"holds the key that authenticates checkpoints: fix it with `chmod 700 {directory}`, or "
            f"point --state-key-file (or ${KEY_FILE_ENV}) at a key file elsewhere"
        )


def _create(path: Path) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_hex(KEY_BYTES) + "\n")


def _private(info: os.stat_result, made_here: bool) -> bool:
    """A regular file nobody else can write and, unless it is root's, nobody else can read.

    A key file given explicitly and owned by root is an administrator's or a Kubernetes Secret's
    (mounted read-only into this pod alone, readable so that the image's non-root user can read it). Any
    other owner than the user could have chosen the key.
    """
    if not stat.S_ISREG(info.st_mode) or info.st_uid not in (os.getuid(), 0) or info.st_mode & 0o022:
        return False
    if info.st_uid == 0 and not made_here:
        return True
    return info.st_uid == os.getuid() and not info.st_mode & 0o077


def _read(path: Path, made_here: bool = False) -> StateKey:
    # The default file is never reached through a link. A file given explicitly may be: a Kubernetes
    # Secret volume presents each key as a link into a timestamped directory. What counts is the file
    # the link leads to, which must be private all the same (checked on the open file below).
    flags = os.O_RDONLY | (os.O_NOFOLLOW if made_here else 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise StateKeyError(
            f"the state key file {path} does not exist: give the deployment's key file (on Kubernetes "
            "the operator mounts it), or leave --state-key-file unset to use the default one"
        ) from None
    except OSError as err:
        raise StateKeyError(
            f"the state key file {path} cannot be opened ({err}); it must not be a symlink"
        ) from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not _private(info, made_here):
            raise StateKeyError(
                f"the state key file {path} must be a regular file of yours that other users can neither "
                f"read nor write (or root's that they cannot write): fix it with `chmod 600 {path}`"
            )
        text = handle.read(4 * KEY_BYTES + 2).strip()
    try:
        secret = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        secret = b""
    if len(secret) < KEY_BYTES:
        raise StateKeyError(
            f"{path} is not a Sluice state key: it must hold at least {2 * KEY_BYTES} hexadecimal digits "
            f"(make one with `python -c 'import secrets; print(secrets.token_hex({KEY_BYTES}))'`)"
        )
    return StateKey(secret)
