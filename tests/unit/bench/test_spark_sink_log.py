"""The peers' outputs are read through the parquet sink's commit log, each committed file once.

W7 at 2,000,000 events a side ran 21 micro-batches; the log's compaction at batch 9 and 19 listed every
earlier file again, and the reader counted Spark's 21,970,000 pairs as 52,710,000.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from testkit.jobs import REPO


def _write_log(log: Path, name: str, files: list[str]) -> None:
    lines = ["v1", *(json.dumps({"path": f"file://{f}", "size": 1, "action": "add"}) for f in files)]
    (log / name).write_text("\n".join(lines) + "\n")


def test_a_compacted_log_names_each_committed_file_once(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from _structured_streaming import committed_files
    finally:
        sys.path.remove(str(REPO / "bench"))
    log = tmp_path / "_spark_metadata"
    log.mkdir()
    part = [str(tmp_path / f"part-{b}.parquet") for b in range(12)]
    for batch in range(12):
        if batch == 9:  # Spark writes the tenth batch's entry as a compaction of all before it
            _write_log(log, "9.compact", part[:10])
        else:
            _write_log(log, str(batch), [part[batch]])
    (log / ".3.crc").write_text("checksum")
    assert committed_files(tmp_path) == part
