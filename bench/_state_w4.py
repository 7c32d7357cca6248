"""W4: a generator keyed by `i % keys` into a keyed process function that counts per key in ValueState.

Nothing is emitted: the job's cost is reading the key, the state access and checkpointing the state.
Args: keys (distinct keys), splits (source splits; default 2).
"""

from __future__ import annotations

from typing import Any

import sluice
from sluice.connectors import GeneratorSource, PrintSink


class CountPerKey(sluice.KeyedProcessFunction):
    def open(self, ctx: sluice.RuntimeContext) -> None:
        self.count = ctx.get_state(sluice.ValueStateDescriptor("count", default=0))

    def process_element(self, value: Any, ctx: sluice.KeyedContext) -> None:
        count = self.count
        count.update((count.value() or 0) + 1)  # never None: the default is 0


def build(env: sluice.StreamEnvironment) -> None:
    keys = int(env.args.get("keys", "10000"))
    splits = int(env.args.get("splits", "2"))
    (
        env.from_source(GeneratorSource(lambda i: i % keys, splits=splits), uid="gen")
        .key_by(lambda k: k)
        .process(CountPerKey(), uid="count")
        .sink_to(PrintSink(), uid="nothing")  # the job must end in a sink; no record reaches it
    )
