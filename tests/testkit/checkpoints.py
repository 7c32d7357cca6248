"""Reading checkpoint metadata in tests, and where the test pipelines live."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from testkit.jobs import REPO

PIPELINES = REPO / "tests" / "integration" / "pipelines"


def metadata_files(checkpoint_dir: Path) -> list[Path]:
    """Every completed checkpoint's `_metadata` below `checkpoint_dir`, oldest first."""
    return sorted(checkpoint_dir.glob("*/chk-*/_metadata"), key=lambda p: int(p.parent.name[4:]))


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def operator(metadata: dict[str, Any], uid: str) -> dict[str, Any]:
    for entry in metadata["operators"]:
        if entry["uid"] == uid:
            return entry  # type: ignore[no-any-return]
    raise AssertionError(f"no operator {uid!r} in {[o['uid'] for o in metadata['operators']]}")
