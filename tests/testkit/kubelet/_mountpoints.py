"""Mount points on the host for pod volumes, created when missing and removed when no longer used.

A bind mount needs an existing directory (or file) to mount on, and pods ask for paths such as
/etc/config or /var/run/secrets/kubernetes.io/serviceaccount that the host may not have. The kubelet
creates the missing parts, remembers them, and removes them (only if still empty) once no pod of its
own uses them and no mount namespace on the machine (another test session's pods, say) has a mount
there; otherwise they stay, as empty directories or files.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from ._volumes import Mount


def _mount_points_in_use() -> set[str]:
    """Mount points of every mount namespace on the machine (one /proc/<pid>/mountinfo per namespace)."""
    seen_namespaces: set[int] = set()
    points: set[str] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            namespace = os.stat(f"/proc/{entry.name}/ns/mnt").st_ino
            if namespace in seen_namespaces:
                continue
            seen_namespaces.add(namespace)
            with open(f"/proc/{entry.name}/mountinfo") as mountinfo:
                # Field 5 is the mount point, with spaces and the like octal-escaped.
                points.update(line.split()[4].encode().decode("unicode_escape") for line in mountinfo)
        except OSError:  # the process ended meanwhile
            continue
    return points


class MountPoints:
    def __init__(self, log: logging.Logger) -> None:
        self._log = log
        self._created: list[Path] = []  # in creation order: parents before children
        self._targets: dict[Path, set[str]] = {}  # mount target -> pods that mount there

    def acquire(self, owner: str, mounts: Iterable[Mount], working_dir: str) -> None:
        """Make every mount target exist on the host (a directory or a file, like its source), and the
        working directory too (Docker creates a missing WORKDIR)."""
        wanted = [(Path(m.target), Path(m.source).is_dir()) for m in mounts] + [(Path(working_dir), True)]
        for target, is_dir in wanted:
            self._targets.setdefault(target, set()).add(owner)
            missing = [
                p for p in [*reversed(target.parents), target] if not p.exists() and not p.is_symlink()
            ]
            for path in missing:
                if path == target and not is_dir:
                    path.touch()
                else:
                    path.mkdir()
                self._created.append(path)

    def release(self, owner: str) -> None:
        """Forget `owner`'s mounts; remove the created paths nobody mounts on any more."""
        for users in self._targets.values():
            users.discard(owner)
        in_use = [target for target, users in self._targets.items() if users]
        candidates = [p for p in self._created if not any(t == p or t.is_relative_to(p) for t in in_use)]
        if not candidates:
            return
        mounted = _mount_points_in_use()
        for path in reversed(candidates):  # children before parents
            if str(path) in mounted:
                continue
            with contextlib.suppress(OSError):  # not empty, or gone: leave it
                if path.is_dir():
                    path.rmdir()
                elif path.stat().st_size == 0:
                    path.unlink()
            if not path.exists():
                self._created.remove(path)
                self._targets.pop(path, None)
                self._log.info("removed mount point %s", path)
