"""The job result store on real files: what a reader finds after a write that was cut short."""

from __future__ import annotations

from pathlib import Path

import pytest
from fsspec.implementations.local import LocalFileOpener

from sluice._states import JobState
from sluice.coordinator.result_store import JobResult, read_result, write_result

from ._support import TEST_KEY


def test_a_result_write_cut_short_leaves_the_previous_result_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_dir = f"file://{tmp_path / 'job'}"
    write_result(job_dir, JobResult("job", JobState.FAILED, 1, error="the first end"), TEST_KEY)
    real_write = LocalFileOpener.write

    def half_then_fail(self: LocalFileOpener, data: bytes) -> int:
        real_write(self, data[: len(data) // 2])
        raise OSError("no space left on device")

    monkeypatch.setattr(LocalFileOpener, "write", half_then_fail)
    with pytest.raises(OSError, match="no space"):
        write_result(job_dir, JobResult("job", JobState.FINISHED, 2), TEST_KEY)
    monkeypatch.undo()

    stored = read_result(job_dir, "job", TEST_KEY)
    assert stored is not None and stored.state == JobState.FAILED
    assert sorted(p.name for p in (tmp_path / "job").iterdir()) == ["job-result.json"]


def test_a_written_result_is_read_back(tmp_path: Path) -> None:
    job_dir = f"file://{tmp_path / 'job'}"
    assert read_result(job_dir, "job", TEST_KEY) is None
    write_result(
        job_dir,
        JobResult("job", JobState.CANCELED, 3, last_savepoint="file:///sp/savepoint-x", error="canceled"),
        TEST_KEY,
    )
    stored = read_result(job_dir, "job", TEST_KEY)
    assert stored == JobResult(
        "job", JobState.CANCELED, 3, last_savepoint="file:///sp/savepoint-x", error="canceled"
    )
