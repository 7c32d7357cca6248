"""Reading checkpoint metadata in tests, and where the test pipelines live."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from testkit.jobs import REPO

PIPELINES = REPO / "tests" / "integration" / "pipelines"
GENERATED_COUNTS = PIPELINES / "generated_counts.py"


def generated_counts_options(
    out: Path, checkpoints: Path, count: int, job_id: str, *, interval: str = "300ms", rate: int = 8000
) -> list[str]:
    """`sluice run` options of GENERATED_COUNTS at parallelism 2: a rate-limited job, long enough to be
    interrupted (its output is `outputs.keyed_window_reference(count, 50, 1000, 10)`)."""
    return [
        *("--arg", f"out={out}", "--arg", f"count={count}", "--arg", f"rate={rate}"),
        *("--parallelism", "2", "--checkpoint-dir", f"file://{checkpoints}"),
        *("--checkpoint-interval", interval, "--job-id", job_id),
    ]


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
