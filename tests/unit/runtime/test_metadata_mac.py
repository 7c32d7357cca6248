"""The MAC over `_metadata` and the deployment's key file (`sluice.checkpoint.integrity`, `state_key`)."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
from pathlib import Path

import pytest

from sluice.checkpoint.integrity import ALGORITHM, Verdict, canonical, seal, verdict
from sluice.checkpoint.state_key import KEY_FILE_ENV, StateKey, StateKeyError, _private, load_state_key
from sluice.state.stored_files import DigestingWriter, sha256

KEY = StateKey(bytes(range(32)))
DOCUMENT = {"version": 3, "checkpointId": 7, "jobId": "j", "operators": [{"uid": "ü", "subtasks": []}]}


def test_the_mac_is_hmac_sha256_over_the_canonical_json_without_the_mac() -> None:
    sealed = seal(DOCUMENT, KEY)
    body = json.dumps(DOCUMENT, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    assert sealed["integrity"] == {
        "algorithm": ALGORITHM,
        "keyId": KEY.key_id,
        "mac": hmac.new(bytes(range(32)), body, hashlib.sha256).hexdigest(),
    }
    assert {k: v for k, v in sealed.items() if k != "integrity"} == DOCUMENT


def test_a_sealed_document_verifies_however_it_was_laid_out() -> None:
    sealed = seal(DOCUMENT, KEY)
    reread = json.loads(json.dumps(sealed, indent=3))  # indentation and key order are not signed
    assert verdict(reread, KEY) is Verdict.VALID
    assert canonical(reread) == canonical(dict(reversed(list(reread.items()))))


def test_any_change_is_tampering_and_another_key_is_told_apart() -> None:
    sealed = seal(DOCUMENT, KEY)
    edited = json.loads(json.dumps(sealed))
    edited["checkpointId"] = 8
    assert verdict(edited, KEY) is Verdict.TAMPERED
    assert verdict(sealed, StateKey(b"x" * 32)) is Verdict.OTHER_KEY
    assert verdict(DOCUMENT, KEY) is Verdict.UNSIGNED
    assert verdict({**sealed, "integrity": "forged"}, KEY) is Verdict.TAMPERED
    assert (
        verdict({**sealed, "integrity": {**sealed["integrity"], "algorithm": "none"}}, KEY)
        is Verdict.TAMPERED
    )


def test_a_value_no_writer_makes_is_tampering_not_a_crash() -> None:
    sealed = seal(DOCUMENT, KEY)
    assert verdict({**sealed, "checkpointId": float("nan")}, KEY) is Verdict.TAMPERED


def test_the_key_id_names_the_key_without_revealing_it() -> None:
    assert KEY.key_id == StateKey(bytes(range(32))).key_id != StateKey(b"y" * 32).key_id
    assert bytes(range(32)).hex()[:16] not in KEY.key_id
    assert repr(KEY) == "StateKey()"  # never in a log line or a traceback


def test_the_digest_taken_while_writing_is_the_files_sha256(tmp_path: Path) -> None:
    with (tmp_path / "f").open("wb") as handle:
        out = DigestingWriter(handle)
        for part in (b"a" * 5000, b"", b"bc"):
            out.write(part)
    assert out.hexdigest() == sha256((tmp_path / "f").read_bytes())


def test_the_default_key_file_is_made_private_once_and_then_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    first = load_state_key()
    path = tmp_path / "config" / "sluice" / "state.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert load_state_key() == first
    assert len(first.secret) == 32


def test_the_default_key_file_made_readable_by_others_is_refused_saying_how_to_fix_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    first = load_state_key()
    path = tmp_path / "sluice" / "state.key"
    path.chmod(0o644)
    with pytest.raises(StateKeyError, match=r"chmod 600"):
        load_state_key()
    path.chmod(0o600)
    assert load_state_key() == first


ME, ROOT, OTHER = 1000, 0, 1001


@pytest.mark.parametrize(
    ("owner", "mode", "made_here", "ok"),
    [
        (ME, 0o600, True, True),
        (ME, 0o600, False, True),
        (ME, 0o640, False, False),  # the user's own file: nobody else may read it
        (ME, 0o644, True, False),
        (ME, 0o620, False, False),
        (ROOT, 0o444, False, True),  # a Kubernetes Secret mount, or an administrator's file
        (ROOT, 0o644, False, True),
        (ROOT, 0o666, False, False),  # others could choose the key
        (ROOT, 0o444, True, False),  # where Sluice makes the user's key, root's file is not it
        (OTHER, 0o600, False, False),
    ],
)
def test_which_key_files_are_private_enough(
    owner: int, mode: int, made_here: bool, ok: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "getuid", lambda: ME)
    info = os.stat_result((stat.S_IFREG | mode, 1, 1, 1, owner, owner, 64, 0, 0, 0))
    assert _private(info, made_here) is ok


def test_a_key_file_that_is_no_regular_file_is_refused() -> None:
    info = os.stat_result((stat.S_IFIFO | 0o600, 1, 1, 1, os.getuid(), 0, 0, 0, 0, 0))
    assert not _private(info, made_here=False)


def test_a_key_file_given_through_links_is_read_as_a_kubernetes_secret_volume_presents_it(
    tmp_path: Path,
) -> None:
    # A Secret volume: key -> ..data/key, ..data -> ..<timestamp>, which holds the file.
    stamped = tmp_path / "..2026_11_26_06_00_00.1"
    stamped.mkdir()
    (stamped / "key").write_text("cd" * 32)
    (stamped / "key").chmod(0o600)
    (tmp_path / "..data").symlink_to(stamped.name)
    (tmp_path / "key").symlink_to("..data/key")
    assert load_state_key(str(tmp_path / "key")).secret == bytes.fromhex("cd" * 32)
    # What the links lead to must be private all the same.
    (stamped / "key").chmod(0o666)
    with pytest.raises(StateKeyError, match="chmod 600"):
        load_state_key(str(tmp_path / "key"))


def test_the_default_key_file_replaced_by_a_link_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    load_state_key()
    path = tmp_path / "config" / "sluice" / "state.key"
    planted = tmp_path / "planted.key"
    planted.write_text("ab" * 32)
    planted.chmod(0o600)
    path.unlink()
    path.symlink_to(planted)
    with pytest.raises(StateKeyError, match="symlink"):
        load_state_key()


def test_a_missing_or_short_key_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(StateKeyError, match="does not exist"):
        load_state_key(str(tmp_path / "missing.key"))
    short = tmp_path / "short.key"
    short.write_text("ab" * 8)
    short.chmod(0o600)
    monkeypatch.setenv(KEY_FILE_ENV, str(short))
    with pytest.raises(StateKeyError, match="64 hexadecimal digits"):
        load_state_key()


def test_a_key_directory_others_can_open_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    (tmp_path / "sluice").mkdir(mode=0o755)
    os.chmod(tmp_path / "sluice", 0o755)
    with pytest.raises(StateKeyError, match="chmod 700"):
        load_state_key()
    assert not (tmp_path / "sluice" / "state.key").exists()
