"""Exactly-once checks of the example pipelines' output, against references computed in plain Python.

examples/unbounded_counts.py writes one line per key and 1 s event-time window: [key, window start in
seconds, count, sum of i], where record i has key i % keys and event time i * ms_per_record ms. Its
GeneratorSource has two splits: split s emits s, s + 2, s + 4, ... So once a job has been drained
(`spec.state: finished`, which fires every window), the records that went through are, per parity p,
exactly i < N_p for some N_p. With an even number of keys a key's records all have one parity, so the
line of (key, window) with count c covers the first c records of that key in that window, and the
highest such record gives N_p. The reference is then every window of every record i < N_{i % 2}: any
lost, duplicated or wrong line shows up as a difference, line by line.
"""

from __future__ import annotations

import collections
import json

from testkit.outputs import assert_same_output

# The defaults of examples/unbounded_counts.py, which examples/k8s/streamjob.yaml does not change.
KEYS, MS_PER_RECORD, WINDOW_MS = 100, 1, 1000
SPLITS = 2


def generated_prefixes(output: collections.Counter[str]) -> dict[int, int]:
    """N_p per split parity p: how many records (i < N_p, i % 2 == p) the job has processed."""
    assert KEYS % SPLITS == 0, "a key's records must all come from one split"
    last: dict[int, int] = {}
    for line in output:
        key, window_s, count, _ = json.loads(line)
        first_in_window = window_s * WINDOW_MS // MS_PER_RECORD
        offset = (key - first_in_window) % KEYS
        record = first_in_window + offset + KEYS * (count - 1)
        last[key % SPLITS] = max(last.get(key % SPLITS, -1), record)
    return {parity: last.get(parity, parity - SPLITS) + SPLITS for parity in range(SPLITS)}


def unbounded_reference(prefixes: dict[int, int]) -> collections.Counter[str]:
    acc: dict[tuple[int, int], tuple[int, int]] = {}
    for parity, end in prefixes.items():
        for i in range(parity, end, SPLITS):
            key, window = i % KEYS, i * MS_PER_RECORD // WINDOW_MS
            count, total = acc.get((key, window), (0, 0))
            acc[(key, window)] = (count + 1, total + i)
    return collections.Counter(json.dumps([k, w, c, s]) for (k, w), (c, s) in acc.items())


def assert_unbounded_exactly_once(output: collections.Counter[str], *, at_least: int) -> dict[int, int]:
    """The drained output of examples/unbounded_counts.py is exactly its reference; returns N_p."""
    assert sum(output.values()) > 0, "the job wrote no output at all"
    prefixes = generated_prefixes(output)
    assert sum(prefixes.values()) >= at_least, (
        f"the job processed only {prefixes} records per split, fewer than the {at_least} it had "
        "already processed before: output was lost"
    )
    assert_same_output(output, unbounded_reference(prefixes))
    return prefixes
