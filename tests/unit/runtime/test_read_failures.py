"""Which failures of a restore are the store's (the job suspends) and which are not (damage, user code)."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from sluice.checkpoint.read_failures import is_storage_read_failure
from sluice.state.stored_files import IntegrityError, read_verified, sha256


class _Failing(MemoryFileSystem):  # type: ignore[misc]
    protocol = "failingreads"

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        raise OSError(errno.EIO, "the store answered 500")


def _raised(call: Any) -> BaseException:
    with pytest.raises(Exception) as caught:
        call()
    return caught.value


def test_a_read_the_store_fails_is_a_storage_failure() -> None:
    fsspec.register_implementation(_Failing.protocol, _Failing, clobber=True)
    error = _raised(lambda: read_verified("failingreads://chk/op-0.state", None, "op-0.state"))
    assert isinstance(error, OSError)
    assert is_storage_read_failure(error)


def test_a_damaged_or_missing_file_is_not(tmp_path: Path) -> None:
    state = tmp_path / "op-0.state"
    state.write_bytes(b"changed")
    state.chmod(0o600)
    damaged = _raised(lambda: read_verified(str(state), sha256(b"written"), "op-0.state"))
    assert isinstance(damaged, IntegrityError)
    assert not is_storage_read_failure(damaged)
    missing = _raised(lambda: read_verified(str(tmp_path / "gone.state"), None, "gone.state"))
    assert not is_storage_read_failure(missing)


def test_an_os_error_of_the_code_that_restores_is_not() -> None:
    def restore_hook() -> None:
        raise OSError(errno.ECONNREFUSED, "the user's database is down")

    assert not is_storage_read_failure(_raised(restore_hook))
