"""Token files: only their user reads them, a job id cannot steer them out of their directory, and a
coordinator removes only its own."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from sluice import _tokens


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


def test_a_stored_token_is_readable_by_its_user_only(state: Path) -> None:
    path = _tokens.store_token("job-1", "s3cret")
    assert path == state / "sluice" / "rest-tokens" / "job-1"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o700
    assert _tokens.find_token("job-1") == "s3cret"
    assert [p.name for p in path.parent.iterdir()] == ["job-1"], "no scratch file is left behind"


def test_an_existing_state_directory_is_closed_to_others(state: Path) -> None:
    (state / "sluice").mkdir(parents=True, mode=0o755)
    (state / "sluice").chmod(0o755)
    _tokens.store_token("job-1", "s3cret")
    assert stat.S_IMODE((state / "sluice").stat().st_mode) == 0o700


def test_without_xdg_state_home_tokens_go_under_local_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    assert _tokens.token_dir() == tmp_path / ".local" / "state" / "sluice" / "rest-tokens"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/dir")  # invalid by the XDG spec: ignored
    assert _tokens.token_dir() == tmp_path / ".local" / "state" / "sluice" / "rest-tokens"


@pytest.mark.parametrize("job_id", ["../../.ssh/id_rsa", "/etc/passwd", "..", "a/b", "", "x" * 300])
def test_a_job_id_cannot_name_a_file_outside_the_token_directory(state: Path, job_id: str) -> None:
    path = _tokens.token_path(job_id)
    assert path.parent == _tokens.token_dir() and path.name.startswith("sha256-")
    assert _tokens.find_token(job_id) is None


def test_a_coordinator_removes_its_own_token_file_only(state: Path) -> None:
    _tokens.store_token("job-1", "newer")
    _tokens.remove_token("job-1", "older")
    assert _tokens.find_token("job-1") == "newer", "a newer coordinator's token stays"
    _tokens.remove_token("job-1", "newer")
    assert _tokens.find_token("job-1") is None
    _tokens.remove_token("job-1", "newer")  # gone already: nothing to do


def test_new_tokens_are_long_random_and_header_safe() -> None:
    tokens = {_tokens.new_token() for _ in range(20)}
    assert len(tokens) == 20
    assert all(len(t) >= 40 and _tokens.checked_token(t, "x") == t for t in tokens)


def test_token_files_and_values_that_cannot_serve_are_refused(tmp_path: Path) -> None:
    (tmp_path / "ok").write_text("  abc.DEF-123  \n")
    assert _tokens.read_token_file(str(tmp_path / "ok")) == "abc.DEF-123"
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        _tokens.read_token_file(str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="cannot read the REST token file"):
        _tokens.read_token_file(str(tmp_path / "missing"))
    for bad in ("two words", "ünïcode", "line\nbreak"):
        with pytest.raises(ValueError, match="visible ASCII only"):
            _tokens.checked_token(bad, "SLUICE_REST_TOKEN")
