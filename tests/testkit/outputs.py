"""Reads FileSink output and computes the reference results of the test pipelines in plain Python."""

from __future__ import annotations

import collections
import json
from typing import Any

import fsspec


def read_output(uri: str, storage_options: dict[str, Any] | None = None) -> collections.Counter[str]:
    """Every committed line under `uri`, as canonical JSON, counted (duplicates would show as counts > 1)."""
    fs, root = fsspec.core.url_to_fs(uri, **(storage_options or {}))
    lines: collections.Counter[str] = collections.Counter()
    if not fs.exists(root):
        return lines
    for path in fs.find(root):
        name = path.rsplit("/", 1)[-1]
        if name.startswith("."):
            continue
        with fs.open(path, "rb") as handle:
            for line in handle.read().decode().splitlines():
                lines[json.dumps(json.loads(line))] += 1
    return lines


def hidden_files(uri: str) -> list[str]:
    fs, root = fsspec.core.url_to_fs(uri)
    return [p for p in fs.find(root) if p.rsplit("/", 1)[-1].startswith(".")] if fs.exists(root) else []


def w1_reference(n: int) -> collections.Counter[str]:
    """W1 computed directly: per key and 1 s window of i // 10 ms, (key, window start ms, count, sum of
    i % 100)."""
    acc: dict[tuple[int, int], tuple[int, int]] = {}
    for i in range(n):
        key, window = (i * 7919) % 1000, (i // 10) // 1000
        count, total = acc.get((key, window), (0, 0))
        acc[(key, window)] = (count + 1, total + i % 100)
    return collections.Counter(json.dumps([k, w * 1000, c, s]) for (k, w), (c, s) in acc.items())


def keyed_window_reference(
    count: int, keys: int, window_ms: int, ms_per_record: int
) -> collections.Counter[str]:
    """The reference of tests/integration/pipelines/generated_counts.py."""
    acc: dict[tuple[int, int], tuple[int, int]] = {}
    for i in range(count):
        key, window = i % keys, (i * ms_per_record) // window_ms
        c, s = acc.get((key, window), (0, 0))
        acc[(key, window)] = (c + 1, s + i)
    return collections.Counter(json.dumps([k, c, s]) for (k, _), (c, s) in acc.items())


def assert_same_output(got: collections.Counter[str], expected: collections.Counter[str]) -> None:
    """Equality of two outputs, with the lines that differ in the failure message."""
    if got == expected:
        return
    missing, extra = expected - got, got - expected
    raise AssertionError(
        f"output differs from the reference: {sum(missing.values())} lines missing, {sum(extra.values())} "
        f"extra or duplicated\nmissing: {sorted(missing)[:8]}\nextra: {sorted(extra)[:8]}"
    )
