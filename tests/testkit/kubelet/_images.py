"""What an image means to the process kubelet: an entrypoint and default arguments run on the host.

There are no image pulls. An image reference is matched against a table of patterns (fnmatch, first
match wins) and the match says which host program plays the image's ENTRYPOINT and CMD. The default
table maps every image to the project's own image contract, `docker/entrypoint.sh`.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[3]
ENTRYPOINT_SCRIPT = REPO_ROOT / "docker" / "entrypoint.sh"

# A built-in image for tests that run shell snippets: `args: ["echo hi"]` runs `/bin/sh -c "echo hi"`.
SHELL_IMAGE = "process-kubelet.test/shell"


@dataclass(frozen=True)
class ImageSpec:
    """The parts of an image config the kubelet emulates (Docker's ENTRYPOINT, CMD, ENV, WORKDIR)."""

    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "entrypoint": list(self.entrypoint),
            "cmd": list(self.cmd),
            "env": dict(self.env),
            "workdir": self.workdir,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ImageSpec:
        return cls(
            tuple(data["entrypoint"]),
            tuple(data.get("cmd", ())),
            dict(data.get("env", {})),
            data.get("workdir"),
        )


def default_images() -> dict[str, ImageSpec]:
    return {
        SHELL_IMAGE: ImageSpec(entrypoint=("/bin/sh", "-c")),
        "*": ImageSpec(entrypoint=(str(ENTRYPOINT_SCRIPT),), workdir=str(REPO_ROOT)),
    }


def images_to_json(images: Mapping[str, ImageSpec]) -> str:
    return json.dumps({pattern: spec.to_json() for pattern, spec in images.items()})


def images_from_json(text: str) -> dict[str, ImageSpec]:
    return {pattern: ImageSpec.from_json(spec) for pattern, spec in json.loads(text).items()}


class ImageError(Exception):
    """The container cannot be started from its image; the message goes into the container status."""


def resolve_image(images: Mapping[str, ImageSpec], image: str) -> ImageSpec:
    for pattern, spec in images.items():
        if fnmatch.fnmatchcase(image, pattern):
            return spec
    raise ImageError(
        f"image {image!r} matches no entry of the process kubelet's image table "
        f"({', '.join(images) or 'empty'}); add a pattern for it"
    )


def container_argv(spec: ImageSpec, command: Sequence[str] | None, args: Sequence[str] | None) -> list[str]:
    """Docker's rule, as Kubernetes documents it for `command` and `args`.

    `command` replaces the ENTRYPOINT and drops the CMD; `args` replaces the CMD.
    """
    argv = [*command, *(args or ())] if command else [*spec.entrypoint, *(args or spec.cmd)]
    if not argv:
        raise ImageError("the container has no command: the image has no entrypoint and none was given")
    if "/" in argv[0] and not Path(argv[0]).exists():
        raise ImageError(f"executable {argv[0]!r} does not exist on this host")
    return argv
