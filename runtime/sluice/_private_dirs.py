"""Directories only this user can use, made below a root that other users may share (such as /tmp).

A default directory of Sluice (checkpoints and Spark logs under `$TMPDIR`, REST tokens, the class-data
cache) is trusted with what it holds: a restore unpickles the checkpoints found there, the JVM maps the
archive found there. Under a shared root another local user could have created it first, world-writable,
or planted a symbolic link in its place. So each directory below the root is walked one component at a
time, relative to the one above it (`dir_fd`, `O_NOFOLLOW`: a symbolic link is never followed), created
0700 when missing, and refused when it is not a directory, belongs to another user, or lets group or
others write (what is in it may have been planted); one that is only readable by others is closed.
Once every component is this user's and 0700, nobody else can change what is inside.

The root itself (`/tmp`, the home directory) is taken as it is: it is where the user chose to be.

Sluice's scratch directory under `$TMPDIR` is named per user, `sluice-<uid>`: two users of one machine
each get their own, and a stranger who makes one in advance only gets a refusal, never the job's files.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

PRIVATE_MODE = 0o700


class PrivateDirectoryError(RuntimeError):
    """A directory that should be this user's alone is not; the message names it and the fix."""


def scratch_path(*parts: str) -> Path:
    """Where `scratch_directory(*parts)` is, without making it."""
    return Path(tempfile.gettempdir(), f"sluice-{os.geteuid()}", *parts)


def scratch_directory(*parts: str) -> Path:
    """This user's private `$TMPDIR/sluice-<uid>/parts...`, made if missing."""
    return private_directory(tempfile.gettempdir(), f"sluice-{os.geteuid()}", *parts)


def private_directory(root: str | Path, *parts: str, confidential: bool = True) -> Path:
    """`root/parts...`, every component below `root` made (or found) 0700 and owned by this user.

    Raises PrivateDirectoryError naming the first component that is a symbolic link, not a directory,
    someone else's, or writable by group or others: what is in it may have been planted. One that is
    this user's and merely readable by others is closed (0700). `confidential=False` is for what
    others may read but not change (a cache of public class data): such a component is left readable.
    """
    root_path = Path(root)
    if any(not part or part in (".", "..") or "/" in part for part in parts):
        raise ValueError(f"private directory parts must be plain names, not {parts!r}")
    root_path.mkdir(mode=PRIVATE_MODE, parents=True, exist_ok=True)
    fd = os.open(root_path, os.O_RDONLY | os.O_DIRECTORY)
    path = root_path
    try:
        for part in parts:
            path = path / part
            child = _open_private(fd, part, path, confidential)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)
    return path


def _open_private(parent: int, name: str, path: Path, confidential: bool) -> int:
    created = False
    try:
        os.mkdir(name, PRIVATE_MODE, dir_fd=parent)
        created = True
    except FileExistsError:
        pass
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
    except OSError as err:
        kind = _kind(parent, name)
        raise PrivateDirectoryError(
            f"{path} is {kind}, not a directory of yours: another user may have put it there to "
            f"catch what Sluice writes. Remove it (or choose another location) and run again"
        ) from err
    try:
        info = os.fstat(fd)
        _check(info, path)
        mode = stat.S_IMODE(info.st_mode)
        # Made now: the umask may have taken bits the owner needs. Found readable by others: only its
        # owner could have written to it, so it is closed rather than refused.
        if (created and mode != PRIVATE_MODE) or (confidential and mode & 0o077):
            os.fchmod(fd, PRIVATE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check(info: os.stat_result, path: Path) -> None:
    if info.st_uid != os.geteuid():
        raise PrivateDirectoryError(
            f"{path} belongs to another user (uid {info.st_uid}), and Sluice keeps its files there: "
            "whoever owns it can read them or plant files that Sluice would trust. Have it removed, or "
            "choose another location (TMPDIR, or the option that names this directory)"
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022:
        raise PrivateDirectoryError(
            f"{path} can be written by other users (mode {mode:04o}), and Sluice keeps its files there: "
            f"another user could have planted files that Sluice would trust. If nothing in it came from "
            f"someone else, run `chmod 700 {path}`; otherwise remove it"
        )


def _kind(parent: int, name: str) -> str:
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except OSError:
        return "unreadable"
    if stat.S_ISLNK(info.st_mode):
        return "a symbolic link"
    return "a file" if stat.S_ISREG(info.st_mode) else "not a directory"


def pid_directory(prefix: str, root: str | Path | None = None, tag: str = "") -> str:
    """A new 0700 directory `root/<prefix><pid>-<tag>...` of this process (`root`: $TMPDIR), made after
    removing this user's directories of that prefix whose process has ended. Its name is what
    `remove_orphaned` reads: one this process leaves behind, killed, the next one removes."""
    parent = str(root) if root is not None else tempfile.gettempdir()
    remove_orphaned(parent, prefix)
    return tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-{tag}", dir=parent)


def remove_orphaned(root: str | Path, prefix: str) -> int:
    """Removes the directories `root/<prefix><pid>-...` of this user whose process `pid` has ended (one
    killed outright cannot remove its own); returns how many. `root` may be the shared $TMPDIR: a link,
    another user's directory, or a name without a pid is left alone, and so is a pid that runs (reused
    or not)."""
    try:
        names = os.listdir(root)
    except OSError:
        return 0
    removed = 0
    for name in names:
        pid, dash, _ = name[len(prefix) :].partition("-")
        if not (name.startswith(prefix) and dash and pid.isdigit()) or _running(int(pid)):
            continue
        path = os.path.join(root, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid():
            shutil.rmtree(path, ignore_errors=True)  # removes through descriptors: no link is followed
            removed += 1
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
