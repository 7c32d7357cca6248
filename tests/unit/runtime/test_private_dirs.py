"""Default directories under a shared root: made private, and refused when a stranger got there first."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from sluice._private_dirs import PrivateDirectoryError, private_directory

NOBODY = 65534


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_missing_directories_are_made_0700_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o777)  # would leave a plain mkdir unusable even by its owner
    try:
        made = private_directory(tmp_path, "sluice", "checkpoints")
    finally:
        os.umask(old)
    assert made == tmp_path / "sluice" / "checkpoints"
    assert mode(tmp_path / "sluice") == 0o700 and mode(made) == 0o700
    assert made.stat().st_uid == os.geteuid()


def test_a_private_directory_that_exists_is_used_again(tmp_path: Path) -> None:
    first = private_directory(tmp_path, "sluice")
    (first / "kept").write_text("x")
    assert private_directory(tmp_path, "sluice") == first
    assert (first / "kept").read_text() == "x"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user takes root")
def test_a_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    squatted = tmp_path / "sluice"
    squatted.mkdir(mode=0o700)
    os.chown(squatted, NOBODY, NOBODY)
    with pytest.raises(PrivateDirectoryError, match=rf"{squatted} belongs to another user \(uid {NOBODY}\)"):
        private_directory(tmp_path, "sluice", "checkpoints")
    assert not (squatted / "checkpoints").exists(), "nothing is made inside a stranger's directory"


def test_a_world_writable_directory_is_refused_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "sluice").mkdir()
    os.chmod(tmp_path / "sluice", 0o777)
    with pytest.raises(PrivateDirectoryError, match=r"mode 0777.*chmod 700 .*/sluice`"):
        private_directory(tmp_path, "sluice")


def test_group_writable_is_refused_too(tmp_path: Path) -> None:
    private_directory(tmp_path, "sluice")
    os.chmod(tmp_path / "sluice", 0o770)
    with pytest.raises(PrivateDirectoryError, match="can be written by other users \\(mode 0770\\)"):
        private_directory(tmp_path, "sluice")


def test_a_directory_of_ours_that_others_can_only_read_is_closed(tmp_path: Path) -> None:
    # Nobody but its owner could have written into it: nothing in it is planted.
    (tmp_path / "sluice").mkdir()
    os.chmod(tmp_path / "sluice", 0o755)
    private_directory(tmp_path, "sluice")
    assert mode(tmp_path / "sluice") == 0o700


def test_a_symlink_planted_in_place_of_the_directory_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "victim"
    target.mkdir(mode=0o700)
    (tmp_path / "sluice").symlink_to(target)
    with pytest.raises(PrivateDirectoryError, match=r"/sluice is a symbolic link, not a directory of yours"):
        private_directory(tmp_path, "sluice", "checkpoints")
    assert list(target.iterdir()) == [], "nothing was made where the link points"


def test_a_symlink_planted_deeper_is_not_followed_either(tmp_path: Path) -> None:
    private_directory(tmp_path, "sluice")
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (tmp_path / "sluice" / "spark-logs").symlink_to(target)
    with pytest.raises(PrivateDirectoryError, match="spark-logs is a symbolic link"):
        private_directory(tmp_path, "sluice", "spark-logs")


def test_a_loose_directory_with_a_planted_file_link_inside_is_refused(tmp_path: Path) -> None:
    squatted = tmp_path / "sluice"
    squatted.mkdir()
    os.chmod(squatted, 0o777)
    (squatted / "job.log").symlink_to(tmp_path / "victim-file")
    with pytest.raises(PrivateDirectoryError, match="can be written by other users"):
        private_directory(tmp_path, "sluice")
    assert not (tmp_path / "victim-file").exists()


def test_a_file_in_place_of_the_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "sluice").write_text("")
    with pytest.raises(PrivateDirectoryError, match="sluice is a file, not a directory of yours"):
        private_directory(tmp_path, "sluice")


@pytest.mark.parametrize("part", ["..", "", "a/b", "."])
def test_parts_must_be_plain_names(tmp_path: Path, part: str) -> None:
    with pytest.raises(ValueError, match="plain names"):
        private_directory(tmp_path, part)


def test_what_is_not_confidential_may_be_readable_but_never_writable_by_others(tmp_path: Path) -> None:
    (tmp_path / "cache").mkdir(mode=0o755)
    os.chmod(tmp_path / "cache", 0o755)
    assert private_directory(tmp_path, "cache", confidential=False) == tmp_path / "cache"
    assert mode(tmp_path / "cache") == 0o755, "left readable: nothing in it is secret"
    os.chmod(tmp_path / "cache", 0o775)
    with pytest.raises(PrivateDirectoryError, match="mode 0775"):
        private_directory(tmp_path, "cache", confidential=False)
