"""One variant's side of `bench/state_primitives.py`: the CPU time of keyed state operations on one
backend, with the runtime found on PYTHONPATH (a worktree of the commit measured).

    PYTHONPATH=<tree>/runtime python bench/_state_ops.py --backend heap --moment idle --ops 200000

Prints one JSON object: nanoseconds of CPU per operation, by operation, the cost of the loop itself (a
call that does nothing, `loop`) taken off. Each operation runs on a fresh
backend whose keys all hold state already (a value; a list and a map of three), the current key set
before each call as the keyed operators set it; the best of `--best-of` runs counts. `--moment frozen`
takes a snapshot first and times the operations while it is still held (the heap's copy-on-write layer).
`W4 record` is one record through a keyed process operator that counts per key in value state, as
W4 (`bench/_state_w4.py`) does: the key selector, the operator's loop and the user function around the
state access, in batches of 1,024 records.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import sluice
from sluice.engine.context import Metrics, OperatorContext
from sluice.engine.operators.keyed import KeyedProcessOperator
from sluice.state.backends import create_backend
from sluice.state.descriptors import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor

KEYS = 10_000
BATCH = 1024


def _fresh(kind: str) -> tuple[Any, Any, Any, Any]:
    backend = create_backend(kind, 128, "bench")
    value = backend.value_state(ValueStateDescriptor("value", default=0))
    items = backend.list_state(ListStateDescriptor[int]("items"))
    entries = backend.map_state(MapStateDescriptor("entries"))
    for key in range(KEYS):
        backend.current_key = key
        value.update(0)
        items.update([0, 1, 2])
        for k in range(3):
            entries.put(k, k)
    return backend, value, items, entries


def _operations(value: Any, items: Any, entries: Any) -> dict[str, Callable[[int], Any]]:
    # Each operation is a lambda, as `loop` is, so that taking `loop` off leaves the operation alone.
    return {
        "loop": lambda i: None,
        "value read": lambda i: value.value(),
        "value update": lambda i: value.update(i),  # noqa: PLW0108
        "value read+update": lambda i: value.update(value.value() + 1),
        "list add": lambda i: items.add(i),  # noqa: PLW0108
        "list get": lambda i: items.get(),
        "map put": lambda i: entries.put(i & 7, i),
        "map get": lambda i: entries.get(i & 7),
        "map put+remove": lambda i: (entries.put(3, i), entries.remove(3)),
    }


def _time(kind: str, moment: str, name: str, rounds: int) -> float:
    """CPU nanoseconds per call of operation `name`, on a fresh backend."""
    backend, value, items, entries = _fresh(kind)
    operation = _operations(value, items, entries)[name]
    snapshot = backend.begin_snapshot() if moment == "frozen" else None
    keys = list(range(KEYS))
    started = time.process_time_ns()
    i = 0
    for _ in range(rounds):
        for key in keys:
            backend.current_key = key
            operation(i)
            i += 1
    spent = time.process_time_ns() - started
    if snapshot is not None:
        snapshot.release()
    backend.close()
    return spent / (rounds * KEYS)


class _CountPerKey(sluice.KeyedProcessFunction):
    def open(self, ctx: sluice.RuntimeContext) -> None:
        self.count = ctx.get_state(sluice.ValueStateDescriptor("count", default=0))

    def process_element(self, value: Any, ctx: sluice.KeyedContext) -> None:
        count = self.count
        count.update((count.value() or 0) + 1)


class _Discard:
    def emit(self, values: list[Any], timestamps: list[int] | None) -> None:
        """W4 emits nothing."""


def _time_w4_record(kind: str, moment: str, rounds: int) -> float:
    """CPU nanoseconds per record through W4's counting operator, every key already counted once."""
    op = KeyedProcessOperator("count", lambda key: key, _CountPerKey())
    ctx = OperatorContext(
        operator_uid="count",
        subtask_index=0,
        parallelism=1,
        max_parallelism=128,
        attempt=0,
        metrics=Metrics(),
        keyed=True,
        state_backend=kind,
    )
    op.setup(ctx, _Discard())  # type: ignore[arg-type]
    op.initialize_state(None)
    op.open()
    keys = list(range(KEYS))
    batches = [keys[i : i + BATCH] for i in range(0, KEYS, BATCH)]
    for batch in batches:
        op.process_batch(batch, None)
    backend = ctx.keyed_backend
    assert backend is not None
    snapshot = backend.begin_snapshot() if moment == "frozen" else None
    started = time.process_time_ns()
    for _ in range(rounds):
        for batch in batches:
            op.process_batch(batch, None)
    spent = time.process_time_ns() - started
    if snapshot is not None:
        snapshot.release()
    backend.close()
    return spent / (rounds * KEYS)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("heap", "disk"), required=True)
    parser.add_argument("--moment", choices=("idle", "frozen"), default="idle")
    parser.add_argument("--ops", type=int, default=200_000, help="calls per operation and run")
    parser.add_argument("--best-of", type=int, default=3)
    args = parser.parse_args()
    rounds = max(1, args.ops // KEYS)
    names = list(_operations(None, None, None))
    spent = {
        name: min(_time(args.backend, args.moment, name, rounds) for _ in range(args.best_of))
        for name in names
    }
    loop = spent.pop("loop")
    w4 = min(_time_w4_record(args.backend, args.moment, rounds) for _ in range(args.best_of))
    print(json.dumps({"loop": loop} | {name: ns - loop for name, ns in spent.items()} | {"W4 record": w4}))


if __name__ == "__main__":
    main()
