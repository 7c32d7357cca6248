"""Host paths the pods need that their volumes would hide: refused when the kubelet starts.

The process kubelet runs containers on this host's file system, with each volume bind-mounted over its
mount path (`_enter.py`). Every pod the operator makes mounts an emptyDir at /tmp (its root file system
is read-only: manifests/hardening.py), which covers whatever the host has under /tmp. A checkout of
the project there (the images' entrypoint and working directory) or a Python environment there would
be missing in every such pod, and each would fail to start with a bare "No such file or directory".
Saying so once, before any pod, names the cause and the fix.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from ._images import ImageSpec

POD_SCRATCH_DIRS = ("/tmp",)
"""Where the operator's pods mount an emptyDir, hiding the host's files under it."""


class HiddenHostPath(Exception):
    """The kubelet's pods could not see a host path they need; the message says which and what to do."""


def needed_paths(images: Mapping[str, ImageSpec]) -> dict[str, Path]:
    """What the pods run from on the host: the Python environment, the images' entrypoints and
    working directories (the project checkout, with the default images)."""
    paths = {"the Python environment (sys.prefix)": Path(sys.prefix)}
    for pattern, spec in images.items():
        if spec.entrypoint and spec.entrypoint[0].startswith("/"):
            paths[f"the entrypoint of images {pattern!r}"] = Path(spec.entrypoint[0])
        if spec.workdir:
            paths[f"the working directory of images {pattern!r}"] = Path(spec.workdir)
    return paths


def hidden(paths: Mapping[str, Path], scratch: Iterable[str] = POD_SCRATCH_DIRS) -> list[str]:
    """The problems: each path (symbolic links resolved) that lies under a scratch directory."""
    problems = []
    for what, path in paths.items():
        resolved = path.resolve()
        for directory in scratch:
            root = Path(directory).resolve()
            if resolved == root or root in resolved.parents:
                problems.append(f"{what}, {resolved}, is under {directory}")
    return problems


def refuse_hidden_paths(images: Mapping[str, ImageSpec]) -> None:
    """Raises HiddenHostPath when a path the pods need lies where their emptyDirs would hide it."""
    problems = hidden(needed_paths(images))
    if problems:
        raise HiddenHostPath(
            "the process kubelet cannot run this project's pods from here: "
            + "; ".join(problems)
            + f". The pods mount an emptyDir over {', '.join(POD_SCRATCH_DIRS)}, which hides those paths "
            "in every container (they would fail with 'No such file or directory'). Clone the repository "
            "outside /tmp (e.g. under your home directory) and run scripts/setup.sh there"
        )
