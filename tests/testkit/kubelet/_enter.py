"""Enter a container's view of the host, then exec its command: `python -I -S _enter.py SPEC.json`.

Run as a fresh, single-threaded process (unshare(2) of a mount namespace needs that, and doing it in
the kubelet's own forked child would run Python code between fork and exec in a threaded process).
It gives the process a private mount namespace with the pod's volumes and an /etc/hosts of its own
bind-mounted at their paths, a UTS namespace whose hostname is the pod's, and then replaces itself
with the container command, so the kubelet's child PID is the container's main process.

Standard library only: it runs with -S, before any site-packages are set up.
"""

import ctypes
import json
import os
import signal
import socket
import sys

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUTS = 0x04000000
_MS_RDONLY = 1
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_PR_SET_PDEATHSIG = 1
# The exit code runc reports when it cannot start the container's process.
_START_ERROR = 128

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, flags: int) -> None:
    _check(
        _libc.mount(source.encode() if source else None, target.encode(), None, flags, None),
        f"mount {source} on {target}",
    )


def _bind(source: str, target: str, read_only: bool) -> None:
    # The kubelet has created missing mount points on the host (see _mountpoints.py).
    _mount(source, target, _MS_BIND | _MS_REC)
    if read_only:
        _mount(None, target, _MS_BIND | _MS_REMOUNT | _MS_RDONLY)


class HiddenPath(Exception):
    """A host path the container needs lies under one of its volumes' mount paths."""


def hiding_mount(path: str, targets: list[str]) -> str | None:
    """The deepest of the mount `targets` at or above `path`, else None."""
    above = [t for t in targets if path == t or path.startswith(t.rstrip("/") + "/")]
    return max(above, key=len, default=None)


def hidden_message(what: str, path: str, target: str) -> str:
    return (
        f"{path} (the container's {what}) is hidden by the volume mounted at {target}: the process kubelet "
        f"runs containers on this host's file system, where a volume mounted at {target} covers "
        f"everything the host has under it. Move it out from under {target}; for a checkout of the "
        "project under /tmp (which the operator's pods mount an emptyDir over), clone it elsewhere, "
        "e.g. under your home directory"
    )


def _needed(spec: dict[str, object]) -> dict[str, str]:
    """The host paths the container starts from: its working directory and its command's file."""
    argv = spec["argv"]
    assert isinstance(argv, list)
    needed = {"working directory": str(spec["cwd"])}
    if argv[0].startswith("/"):
        needed["command"] = argv[0]
    return needed


def _check_visible(present: dict[str, str], targets: list[str]) -> None:
    """Raises HiddenPath for a path that was there before the volumes were mounted and is gone now."""
    for what, path in present.items():
        target = hiding_mount(path, targets)
        if target is not None and not os.path.exists(path):
            raise HiddenPath(hidden_message(what, path, target))


def main(spec_path: str) -> None:
    with open(spec_path) as handle:
        spec = json.load(handle)
    parent = os.getppid()
    _check(_libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
    if os.getppid() != parent:  # the kubelet died before the death signal was armed
        sys.exit(_START_ERROR)

    _check(_libc.unshare(_CLONE_NEWNS | _CLONE_NEWUTS), "unshare")
    # Make every mount private first, or the bind mounts below would propagate back to the host.
    _mount(None, "/", _MS_REC | _MS_PRIVATE)
    mounts = sorted(spec["mounts"], key=lambda m: m["target"].count("/"))
    # Sources are opened before anything is mounted: a volume mounted at a directory that holds the
    # kubelet's state (an emptyDir at /tmp, with the state under /tmp) would hide the sources of the
    # volumes mounted after it. The bind then goes through /proc/self/fd, whatever is mounted since.
    sources = [os.open(mount["source"], os.O_PATH | os.O_CLOEXEC) for mount in mounts]
    present = {what: path for what, path in _needed(spec).items() if os.path.exists(path)}
    for mount, source in zip(mounts, sources, strict=True):
        _bind(f"/proc/self/fd/{source}", mount["target"], mount["read_only"])
    for source in sources:
        os.close(source)
    socket.sethostname(spec["hostname"])
    _check_visible(present, [mount["target"] for mount in mounts])

    os.chdir(spec["cwd"])
    # Closed by a successful exec: the kubelet takes that as the moment the container started.
    os.set_inheritable(spec["exec_fd"], False)
    argv = spec["argv"]
    os.execvpe(argv[0], argv, spec["env"])


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except (OSError, HiddenPath) as error:
        print(f"process kubelet: cannot start the container: {error}", file=sys.stderr, flush=True)
        sys.exit(_START_ERROR)
