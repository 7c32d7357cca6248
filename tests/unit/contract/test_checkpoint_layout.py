"""The contract's reading of a stored `_metadata`: the state files it names, and what is damage.

A `_metadata` comes from storage that other processes or people can write, and the operator reads it
without the key that authenticates it: a field of the wrong shape is named, a name that would reach
outside the checkpoint is refused, and neither is a crash.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fsspec
import pytest

from sluice_contract.checkpoints import (
    NoRestorableCheckpoint,
    StateFile,
    damage,
    latest_restorable,
    state_files,
)


def _filesystems(uri: str) -> tuple[Any, str]:
    fs, path = fsspec.core.url_to_fs(uri)
    return fs, path


def _metadata(*subtasks: object) -> dict[str, Any]:
    return {"operators": [{"uid": "op", "subtasks": list(subtasks)}]}


def test_state_files_are_the_own_and_the_shared_files_of_every_subtask_and_pending_commit() -> None:
    metadata = {
        "operators": [
            {
                "uid": "keyed",
                "subtasks": [
                    {
                        "path": None,
                        "size": 0,
                        "keyedFiles": [{"name": "k-1-ab.kv", "size": 7, "shared": True}],
                    },
                    {"path": "keyed-1.state", "size": 3},
                ],
            },
            {"uid": "sink", "fullyFinished": True, "pendingCommits": [{"path": "sink-0.state", "size": 5}]},
        ]
    }
    assert list(state_files(metadata)) == [
        StateFile("keyed", "k-1-ab.kv", 7, shared=True),
        StateFile("keyed", "keyed-1.state", 3, shared=False),
        StateFile("sink", "sink-0.state", 5, shared=False),
    ]


@pytest.mark.parametrize(
    ("metadata", "named"),
    [
        ({"operators": {"uid": "op"}}, "operators must be a list"),
        ({"operators": [{"uid": 3}]}, r"operators\[0\].uid must be a string"),
        (
            _metadata({"path": "../../etc/passwd", "size": 1}),
            r"operators\[0\].subtasks\[0\].path must be a plain",
        ),
        (_metadata({"path": "..", "size": 1}), r"subtasks\[0\].path must be a plain file name"),
        (_metadata({"path": "a.state", "size": -1}), r"subtasks\[0\].size must be a whole number"),
        (_metadata({"path": "a.state", "size": True}), r"subtasks\[0\].size must be a whole number"),
        (_metadata({"path": None, "keyedFiles": [{"name": "x/y", "size": 1}]}), r"keyedFiles\[0\].name"),
        (
            _metadata({"path": None, "keyedFiles": [{"name": "x", "size": 1, "shared": "yes"}]}),
            "shared must be",
        ),
        (_metadata("not an object"), r"subtasks\[0\] must be an object"),
    ],
)
def test_a_malformed_field_is_named(metadata: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        list(state_files(metadata))


def test_malformed_metadata_is_damage_not_a_crash(tmp_path: Path) -> None:
    problem = damage(str(tmp_path), {"operators": "none"}, _filesystems)
    assert problem == "its _metadata is malformed: operators must be a list, not str"


def _checkpoint(job_dir: Path, n: int, metadata: dict[str, Any] | str, files: dict[str, bytes]) -> None:
    folder = job_dir / f"chk-{n}"
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    (folder / "_metadata").write_text(metadata if isinstance(metadata, str) else json.dumps(metadata))


def _read(location: str) -> dict[str, Any]:
    fs, path = _filesystems(f"{location}/_metadata")
    with fs.open(path, "rb") as handle:
        data = json.loads(handle.read())
    assert isinstance(data, dict)
    return data


def test_the_finder_goes_back_past_unreadable_and_damaged_checkpoints(tmp_path: Path) -> None:
    job = tmp_path / "job"
    _checkpoint(job, 1, _metadata({"path": "op-0.state", "size": 2}), {"op-0.state": b"ok"})
    _checkpoint(job, 2, _metadata({"path": "op-0.state", "size": 2}), {"op-0.state": b"o"})
    _checkpoint(job, 3, "{not json", {})
    (job / "chk-4").mkdir()  # no _metadata: never completed, not a checkpoint
    found = latest_restorable(f"file://{job}", "job", filesystems=_filesystems, read=_read)
    assert found is not None
    assert (found.location, found.checkpoint_id) == (f"file://{job}/chk-1", 1)


def test_a_job_without_checkpoints_has_none_and_one_with_only_damaged_ones_is_refused(tmp_path: Path) -> None:
    job = tmp_path / "job"
    assert latest_restorable(f"file://{job}", "job", filesystems=_filesystems, read=_read) is None
    _checkpoint(job, 1, _metadata({"path": "op-0.state", "size": 2}), {})
    with pytest.raises(
        NoRestorableCheckpoint,
        match=rf"no retained checkpoint of job job can be restored \(file://{job}/chk-1",
    ):
        latest_restorable(f"file://{job}", "job", filesystems=_filesystems, read=_read)
