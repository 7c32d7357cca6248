"""The launch settings of local TaskManagers, handed over in a file that only this user can read.

A barrier task's closure is not private: Spark ships it as a broadcast, a block that its block manager
serves to whoever asks (only `spark.authenticate` stands in the way), and it is kept in memory and in
the driver's block store. So the closure carries no secret, only the path of a file that holds the
launch settings (the job secret, and with `--internal-tls` the CA's key). On `local[N]` the Python
workers are processes of this user on this machine: they read the file; other users cannot (a 0700
directory made by `mkdtemp` with a random name, a 0600 file made with O_EXCL, neither following a link).

A driver killed outright (SIGKILL, the machine's OOM killer) cannot remove its directory, and the file
in it keeps the job secret. So each directory's name carries its driver's pid, and a host that makes
one first removes this user's directories whose driver has gone.
"""

from __future__ import annotations

import os
import shutil
import stat
import uuid
import weakref
from pathlib import Path

from sluice._private_dirs import pid_directory
from sluice.transport.secret import LaunchSettingsError, TaskManagerLaunch

_PRIVATE_FILE = 0o600
_PREFIX = "sluice-launch-"


class LaunchFiles:
    """One private directory per host, made when first needed; a launch file per stage submitted."""

    def __init__(self, parent: Path | None = None) -> None:
        self._parent = parent
        self._directory: Path | None = None

    def write(self, attempt: int, launch: TaskManagerLaunch) -> str:
        """A new 0600 file with `launch`; whoever submitted the stage removes it when the stage ends."""
        if self._directory is None:
            self._directory = Path(pid_directory(_PREFIX, self._parent))
            # Removed with the host, or at the latest when the interpreter exits.
            weakref.finalize(self, shutil.rmtree, self._directory, ignore_errors=True)
        # A name of its own: a stage of an earlier attempt may still be winding down.
        path = self._directory / f"attempt-{attempt}-{uuid.uuid4().hex[:8]}.json"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, _PRIVATE_FILE)
        with os.fdopen(fd, "w") as handle:
            handle.write(launch.encode())
        return str(path)


def read_launch_file(path: str) -> TaskManagerLaunch:
    """The launch settings in `path`, if it is this user's private file (not a link, not shared)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as err:
        raise LaunchSettingsError(
            f"cannot read the launch settings in {path}: {err.strerror or err} (the attempt that wrote "
            "them has ended, or the file is not a plain file)"
        ) from None
    with os.fdopen(fd) as handle:
        info = os.fstat(handle.fileno())
        if info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) & 0o077:
            raise LaunchSettingsError(
                f"the launch settings in {path} are not private to this user (owner uid {info.st_uid}, "
                f"mode {stat.S_IMODE(info.st_mode):04o}): refusing them"
            )
        return TaskManagerLaunch.decode(handle.read())
