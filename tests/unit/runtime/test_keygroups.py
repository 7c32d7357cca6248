"""Keys -> key groups -> subtasks: the same in every process, and an exact partition for every parallelism."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.state.keygroups import (
    channel_table,
    key_group_for,
    key_group_range,
    stable_hash,
    subtask_for_key_group,
)

# Keys whose hash must not depend on the process: str hashing is salted per process in Python.
PLAIN_KEYS: list[Any] = [
    "",
    "a",
    "user-42",
    "ünïcödé ✓",
    ("a", 1),
    ("nested", ("x", 2.5), b"raw", None),
    0,
    -7,
    2**40 + 3,
    True,
    1.25,
    b"\x00\xff",
    None,
]

_OTHER_PROCESS = """
import json, sys
from sluice.state.keygroups import stable_hash
keys = [tuple(k) if isinstance(k, list) else k for k in json.loads(sys.argv[1])]
plain = [stable_hash(k) for k in keys]
sets = [stable_hash(frozenset(s)) for s in json.loads(sys.argv[2])]
print(json.dumps({"plain": plain, "sets": sets}))
"""

SETS = [["a", "b", "c", "d", "e"], ["key", "group", "hash"]]


def _jsonable(key: Any) -> Any:
    if isinstance(key, tuple):
        return [_jsonable(k) for k in key]
    if isinstance(key, bytes):
        raise TypeError
    return key


@pytest.fixture(scope="module")
def other_process() -> dict[str, Any]:
    """Hashes computed by a fresh interpreter with a different str-hash salt (the only subprocess here)."""
    keys = [k for k in PLAIN_KEYS if not _has_bytes(k)]
    env = {**os.environ, "PYTHONHASHSEED": "4242"}
    done = subprocess.run(
        [sys.executable, "-c", _OTHER_PROCESS, json.dumps([_jsonable(k) for k in keys]), json.dumps(SETS)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=60,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    result["keys"] = keys
    return result


def _has_bytes(key: Any) -> bool:
    if isinstance(key, tuple):
        return any(_has_bytes(k) for k in key)
    return isinstance(key, bytes)


def test_str_and_tuple_keys_hash_the_same_in_another_process(other_process: dict[str, Any]) -> None:
    keys = other_process["keys"]
    assert any(isinstance(k, str) for k in keys) and any(isinstance(k, tuple) for k in keys)
    assert other_process["plain"] == [stable_hash(k) for k in keys]


def test_picklable_set_keys_hash_the_same_in_another_process(other_process: dict[str, Any]) -> None:
    # key_by accepts "picklable values"; a frozenset of str pickles in hash-seed-dependent order.
    assert other_process["sets"] == [stable_hash(frozenset(s)) for s in SETS]


def test_hashes_are_32_bit() -> None:
    assert all(0 <= stable_hash(k) < 2**32 for k in PLAIN_KEYS)


@pytest.mark.parametrize(
    "make_key",
    [lambda i: f"user-{i}", lambda i: i, lambda i: ("tenant", i), lambda i: float(i) + 0.5],
    ids=["str", "int", "tuple", "float"],
)
def test_keys_spread_over_all_key_groups(make_key: Any) -> None:
    # 12,800 keys over 128 key groups: 100 expected per group. A skewed hash would overload subtasks.
    counts = [0] * 128
    for i in range(12_800):
        counts[key_group_for(make_key(i), 128)] += 1
    assert min(counts) >= 55 and max(counts) <= 150, (min(counts), max(counts))


@dataclass(frozen=True)
class _Account:
    bank: str
    owner: str


_SHARED = "ab" * 3
_DISTINCT = "".join(["ab", "ab", "ab"])  # equal to _SHARED, but another object


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (True, 1),
        (1, 1.0),
        (0.0, -0.0),
        (("k", 2), ("k", 2.0)),
        (_Account(_SHARED, _SHARED), _Account(_SHARED, _DISTINCT)),
    ],
    ids=["bool-int", "int-float", "zero-negative-zero", "tuple-with-int-float", "picklable-dataclass"],
)
def test_keys_equal_in_python_share_a_key_group(left: Any, right: Any) -> None:
    # Records whose keys compare equal are one key to a keyed operator (its state is a dict keyed by
    # the user key), so they must be routed to the same subtask.
    assert left == right
    assert key_group_for(left, 128) == key_group_for(right, 128)


def test_unpicklable_key_is_refused_with_a_clear_error() -> None:
    with pytest.raises(TypeError, match="cannot partition by a key of type function: key_by needs keys"):
        stable_hash(lambda: None)


@given(
    parallelism=st.integers(min_value=1, max_value=300),
    extra=st.integers(min_value=0, max_value=2000),
)
def test_key_group_ranges_partition_all_key_groups(parallelism: int, extra: int) -> None:
    max_parallelism = parallelism + extra
    ranges = [key_group_range(s, max_parallelism, parallelism) for s in range(parallelism)]
    # Contiguous, in order, exactly covering [0, max_parallelism), none empty.
    assert ranges[0].start == 0
    assert ranges[-1].stop == max_parallelism
    for before, after in itertools.pairwise(ranges):
        assert before.stop == after.start
    assert all(len(r) >= 1 for r in ranges)
    # Balanced: sizes differ by at most one.
    sizes = {len(r) for r in ranges}
    assert max(sizes) - min(sizes) <= 1


@given(
    parallelism=st.integers(min_value=1, max_value=300),
    extra=st.integers(min_value=0, max_value=2000),
)
def test_key_group_range_is_the_inverse_of_subtask_for_key_group(parallelism: int, extra: int) -> None:
    max_parallelism = parallelism + extra
    table = channel_table(max_parallelism, parallelism)
    for subtask in range(parallelism):
        owned = key_group_range(subtask, max_parallelism, parallelism)
        assert all(subtask_for_key_group(g, max_parallelism, parallelism) == subtask for g in owned)
        assert all(table[g] == subtask for g in owned)
    assert sorted(set(table)) == list(range(parallelism))


@given(st.one_of(st.text(), st.integers(), st.tuples(st.text(), st.integers())))
def test_key_group_is_within_bounds(key: Any) -> None:
    for max_parallelism in (1, 7, 128, 32768):
        assert 0 <= key_group_for(key, max_parallelism) < max_parallelism
