"""`sluice run` with its defaults on a machine whose $TMPDIR other users share.

The checkpoint directory a job gets without `--checkpoint-dir` is this user's alone, and what a job
writes there is 0600; one that another user made first, open to writes, is refused before anything is
read from it (the squatter's planted `_metadata` would otherwise be restored, and its pickles run).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from testkit.jobs import REPO, run_job
from testkit.outputs import assert_same_output, read_output, w1_reference

W1 = REPO / "examples" / "w1_window_counts.py"


def test_the_default_checkpoint_directory_and_what_is_in_it_are_private(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = run_job(
        W1, "--arg", "n=20000", "--arg", f"out={out}", "--job-id", "orders", env={"TMPDIR": str(tmp_path)}
    )
    assert done.returncode == 0, done.stderr
    scratch = tmp_path / f"sluice-{os.geteuid()}"
    assert f"checkpoints go to file://{scratch}/checkpoints" in done.stderr
    written = list((scratch / "checkpoints").rglob("*"))
    assert (scratch / "checkpoints" / "orders" / "job-result.json") in written
    modes = {str(p.relative_to(scratch)): stat.S_IMODE(p.lstat().st_mode) for p in [scratch, *written]}
    expected = {name: 0o700 if (scratch / name).is_dir() else 0o600 for name in modes}
    assert modes == expected
    assert_same_output(read_output(str(out)), w1_reference(20_000))


def test_a_squatted_scratch_directory_is_refused_before_anything_in_it_is_read(tmp_path: Path) -> None:
    squatted = tmp_path / f"sluice-{os.geteuid()}"
    planted = squatted / "checkpoints" / "orders" / "chk-1"
    planted.mkdir(parents=True)
    (planted / "_metadata").write_text("{}")
    for directory in (squatted, squatted / "checkpoints"):
        os.chmod(directory, 0o777)
    done = run_job(
        W1, "--arg", f"out={tmp_path / 'out'}", "--job-id", "orders", env={"TMPDIR": str(tmp_path)}
    )
    assert done.returncode == 2, done.stderr
    assert (
        f"sluice: error: {squatted} can be written by other users (mode 0777)" in done.stderr
        and f"run `chmod 700 {squatted}`; otherwise remove it" in done.stderr
    )
    assert "checkpoints go to" not in done.stderr and not (tmp_path / "out").exists()
