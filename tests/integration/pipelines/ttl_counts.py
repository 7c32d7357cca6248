"""Running counts per key in value, list and map state that all have a time to live, for fault tests.

Args: out (required), count, rate, ttl_ms (default one hour: nothing expires during a test, so the
counts are exact and show that TTL-wrapped state is checkpointed and restored whole).
Record i: key i % 20. Output per record: [key, i, count of the key's records so far, the same count
from list state, the same from map state].
"""

from collections.abc import Iterator
from typing import Any

import sluice
from sluice.connectors import FileSink, GeneratorSource


class TtlCounts(sluice.KeyedProcessFunction):
    def __init__(self, ttl_ms: int) -> None:
        self.ttl_ms = ttl_ms

    def open(self, ctx: sluice.RuntimeContext) -> None:
        refreshed = sluice.StateTtl(self.ttl_ms, update="on_read_and_write")
        written = sluice.StateTtl(self.ttl_ms)
        self.count = ctx.get_state(sluice.ValueStateDescriptor("count", default=0, ttl=refreshed))
        self.seen = ctx.get_list_state(sluice.ListStateDescriptor("seen", ttl=written))
        self.by_parity = ctx.get_map_state(sluice.MapStateDescriptor("by-parity", ttl=refreshed))

    def process_element(self, value: Any, ctx: sluice.KeyedContext) -> Iterator[Any]:
        count = (self.count.value() or 0) + 1
        self.count.update(count)
        self.seen.add(value[1])
        parity = value[1] % 2
        self.by_parity.put(parity, (self.by_parity.get(parity) or 0) + 1)
        yield [ctx.key, value[1], count, len(self.seen.get()), sum(self.by_parity.values())]


def build(env: sluice.StreamEnvironment) -> None:
    count = int(env.args.get("count", "20000"))
    rate = float(env.args.get("rate", "0")) or None
    ttl_ms = int(env.args.get("ttl_ms", str(3_600_000)))
    (
        env.from_source(GeneratorSource(lambda i: (i % 20, i), count=count, splits=2, rate=rate), uid="gen")
        .key_by(lambda r: r[0])
        .process(TtlCounts(ttl_ms), uid="ttl-counts")
        .sink_to(FileSink(env.args["out"]), uid="sink")
    )
