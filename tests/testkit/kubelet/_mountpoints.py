"""Mount points on the host for pod volumes, created when missing and removed when no longer used.

A bind mount needs an existing directory (or file) to mount on, and pods ask for paths such as
/etc/config or /var/run/secrets/kubernetes.io/serviceaccount that the host may not have. The kubelet
creates the missing parts, remembers them, and removes them (only if still empty) once no pod of its
own uses them, no other process kubelet of the machine (another test session, or another pytest-xdist
worker's) has a pod that will mount there, and no mount namespace has a mount there; otherwise they
stay, as empty directories or files.

Other kubelets' pods are known from a registry shared by every process kubelet of the machine: each
writes the mount targets its pods use to a file of its own, under a machine-wide lock that also covers
creating and removing paths. Mount namespaces alone would not do: a pod that has been handed a path but
has not mounted it yet shows in none, and removing a directory another namespace has since mounted on
detaches that mount (Linux lazily unmounts it there), so the pod would lose its volume.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from ._volumes import Mount

# Machine-wide, like the paths it guards; the kubelet runs as root.
REGISTRY = Path("/run/sluice-process-kubelet/mount-targets")


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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class MountPoints:
    """`registry`: the machine-wide directory of every process kubelet's mount targets; `identity`: this
    kubelet's process ID, under which it registers (a registration of a process that is gone is dropped)."""

    def __init__(self, log: logging.Logger, registry: Path = REGISTRY, identity: int | None = None) -> None:
        self._log = log
        self._registry = registry
        self._identity = os.getpid() if identity is None else identity
        self._created: list[Path] = []  # in creation order: parents before children
        self._targets: dict[Path, set[str]] = {}  # mount target -> pods that mount there

    @contextlib.contextmanager
    def _machine_lock(self) -> Iterator[None]:
        self._registry.mkdir(parents=True, exist_ok=True)
        with open(self._registry / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _register(self) -> None:
        """Write this kubelet's targets in use to its registry file (under the machine lock)."""
        in_use = sorted(str(target) for target, users in self._targets.items() if users)
        own = self._registry / f"{self._identity}.json"
        if not in_use:
            own.unlink(missing_ok=True)
            return
        partial = own.with_suffix(".tmp")
        partial.write_text(json.dumps(in_use))
        partial.replace(own)

    def _targets_of_other_kubelets(self) -> list[Path]:
        targets: list[Path] = []
        for entry in self._registry.glob("*.json"):
            if not entry.stem.isdigit() or int(entry.stem) == self._identity:
                continue
            if not _alive(int(entry.stem)):
                entry.unlink(missing_ok=True)  # its pods died with it
                continue
            with contextlib.suppress(OSError, ValueError):
                targets.extend(Path(t) for t in json.loads(entry.read_text()))
        return targets

    def acquire(self, owner: str, mounts: Iterable[Mount], working_dir: str) -> None:
        """Make every mount target exist on the host (a directory or a file, like its source), and the
        working directory too (Docker creates a missing WORKDIR)."""
        wanted = [(Path(m.target), Path(m.source).is_dir()) for m in mounts] + [(Path(working_dir), True)]
        with self._machine_lock():
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
            self._register()

    def release(self, owner: str) -> None:
        """Forget `owner`'s mounts; remove the created paths no pod of any process kubelet uses any more."""
        for users in self._targets.values():
            users.discard(owner)
        with self._machine_lock():
            self._register()
            self._remove_unused()

    def _remove_unused(self) -> None:
        in_use = [target for target, users in self._targets.items() if users]
        in_use += self._targets_of_other_kubelets()
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
