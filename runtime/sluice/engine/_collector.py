"""Python's cyclic garbage collector, set up for a process that runs TaskManager work.

A subtask allocates a few objects per record (its tuples, the batch lists) and frees nearly all of them
within the same batch. With Python's default, a young-generation collection every 700 allocations, the
collector runs every few hundred records, and its older collections walk the window state and every
imported module's objects again and again (bench/README.md, "Where a TaskManager's CPU goes").
A larger young generation lets most of those short-lived objects die before any collection looks at
them, and freezing what start-up created (modules, classes, the job graph) keeps them out of every
later collection. Cycles are still collected, after 10,000 allocations rather than 700.

Only for processes of the TaskManager's own: not in a user's process that runs a job in threads
(`sluice.testing`), whose collector settings are the user's.
"""

from __future__ import annotations

import gc

YOUNG_GENERATION = 10_000
"""Allocations (net of frees) between young-generation collections; Python's default is 700."""


def tune_for_records() -> None:
    """Freezes the objects alive now out of the collector's walks and enlarges its young generation."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION, middle, old)
