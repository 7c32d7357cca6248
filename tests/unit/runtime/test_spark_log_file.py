"""Spark's log file and its log4j2 configuration: made 0600 before log4j opens them, never through a link."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from sluice.hosts.spark import SparkLog


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_the_log_and_its_configuration_are_0600_even_when_the_log_was_there(tmp_path: Path) -> None:
    log = SparkLog(tmp_path / "logs" / "job.log")
    log.path.parent.mkdir()
    log.path.write_text("an older run\n")
    os.chmod(log.path, 0o644)
    log.write_config()
    assert (mode(log.path), mode(log.config)) == (0o600, 0o600)
    assert log.path.read_text() == "an older run\n", "appended to, not truncated"
    assert f"fileName = {log.path}" in log.config.read_text()


def test_a_link_planted_in_place_of_the_log_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("kept")
    os.chmod(victim, 0o644)
    log = SparkLog(tmp_path / "job.log")
    log.path.symlink_to(victim)
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        log.write_config()
    assert (victim.read_text(), mode(victim)) == ("kept", 0o644)
