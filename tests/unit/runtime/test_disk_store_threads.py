"""The disk state backend's LMDB store closed by the snapshot writer's thread leaves no lock behind.

A snapshot that reads the store keeps it open after its backend closed; whichever lets go last closes
it, and that may be the writer's thread. LMDB's write lock is a robust pthread mutex, listed on the
thread that locked it until that thread unlocks it. If the store's write transaction were ended from the
writer's thread, the unlock would fail and the close would unmap the mutex while the task's thread
still listed it: the next LMDB lock on that thread then wrote through the stale entry. The unit tier
died of exactly that once, a segmentation fault inside `lmdb.open` (sluice/state/disk.py, `Store.close`).

The test reads the thread's robust-mutex list from the kernel (get_robust_list) and asks that no entry
points at memory that is no longer mapped.
"""

from __future__ import annotations

import ctypes
import platform
import threading
from pathlib import Path

import pytest

from sluice.state.descriptors import ValueStateDescriptor
from sluice.state.disk import DiskKeyedStateBackend

_GET_ROBUST_LIST = {"x86_64": 274, "aarch64": 100}.get(platform.machine())


def _robust_list() -> list[int]:
    """Addresses of the robust mutexes this thread holds, as the kernel's list for it says."""
    assert _GET_ROBUST_LIST is not None
    libc = ctypes.CDLL(None, use_errno=True)
    head, size = ctypes.c_void_p(), ctypes.c_size_t()
    if libc.syscall(_GET_ROBUST_LIST, 0, ctypes.byref(head), ctypes.byref(size)) != 0:
        raise OSError(ctypes.get_errno(), "get_robust_list")
    assert head.value is not None
    entries: list[int] = []
    entry = ctypes.c_void_p.from_address(head.value).value  # robust_list_head.list
    while entry and entry & ~1 != head.value and len(entries) < 64:
        address = entry & ~1
        entries.append(address)
        if _mapping(address) is None:
            break  # a stale entry: following it would read unmapped memory
        entry = ctypes.c_void_p.from_address(address).value
    return entries


def _mapping(address: int) -> str | None:
    """What /proc/self/maps says is mapped at `address` (its path, or "anonymous"), None if nothing."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split()
        low, high = (int(bound, 16) for bound in fields[0].split("-"))
        if low <= address < high:
            return fields[5] if len(fields) > 5 else "anonymous"
    return None


@pytest.mark.skipif(_GET_ROBUST_LIST is None, reason="get_robust_list's number is known for x86_64, aarch64")
def test_a_store_closed_by_the_snapshot_writers_thread_leaves_no_lock_on_the_tasks_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLUICE_STATE_DIR", str(tmp_path / "local-state"))
    before = _robust_list()
    backend = DiskKeyedStateBackend(128, "threads")
    backend.current_key = "k"
    backend.value_state(ValueStateDescriptor("v", default=0)).update(1)
    held = [a for a in _robust_list() if a not in before]
    assert held and all((_mapping(a) or "").endswith("lock.mdb") for a in held), (
        "the store's write transaction holds LMDB's write lock on this thread"
    )

    snapshot = backend.begin_snapshot()  # reads the store: the store outlives its backend's close
    backend.close()
    writer = threading.Thread(target=snapshot.release)  # the writer's thread lets go last and closes it
    writer.start()
    writer.join()

    assert not list((tmp_path / "local-state").glob("*")), "the last one out closed and removed the store"
    stale = [hex(a) for a in _robust_list() if _mapping(a) is None]
    assert stale == [], "this thread still lists a lock the closed store's unmapped file held"
    assert _robust_list() == before

    # And LMDB locks taken on this thread afterwards work (with a stale entry, a segfault or a stray write).
    other = DiskKeyedStateBackend(128, "after")
    other.current_key = "k"
    state = other.value_state(ValueStateDescriptor("v", default=0))
    state.update(2)
    assert state.value() == 2
    other.close()
