"""The job of bench/ttl_steady_state.py: ever-new keys into keyed state with a time-to-live.

A rate-limited generator emits i = 0, 1, 2, ... and every record is a new key: without expiry the
state would grow by `rate` keys a second for ever. The keyed function keeps a value and a map entry
per key, both with a TTL of `ttl_ms` (processing time), and writes how many keys its backend holds to
`<probe>/entries-<subtask>` every few seconds: the number of entries is not in REST, and it is the
figure that shows expired keys really leave the backend. Args: rate (keys/s), ttl_ms, probe (a
directory).
"""

from __future__ import annotations

import os
import time
from typing import Any

import sluice
from sluice.connectors import GeneratorSource, PrintSink

PROBE_EVERY_S = 5.0


class RememberEachKey(sluice.KeyedProcessFunction):
    def __init__(self, ttl_ms: int, probe: str) -> None:
        self.ttl_ms, self.probe = ttl_ms, probe

    def open(self, ctx: sluice.RuntimeContext) -> None:
        ttl = sluice.StateTtl(self.ttl_ms)
        self.first_seen = ctx.get_state(sluice.ValueStateDescriptor("first_seen", ttl=ttl))
        self.tags = ctx.get_map_state(sluice.MapStateDescriptor("tags", ttl=ttl))
        # Bench-only introspection: the backend behind the handles, to count the keys it holds.
        self.backend: Any = getattr(ctx, "keyed_backend")  # noqa: B009
        self.file = os.path.join(self.probe, f"entries-{ctx.subtask_index}")
        self.next_probe = 0.0

    def process_element(self, value: int, ctx: sluice.KeyedContext) -> None:
        if self.first_seen.value() is None:
            self.first_seen.update(value)
        self.tags.put(value % 7, value)
        now = time.monotonic()
        if now >= self.next_probe:
            self.next_probe = now + PROBE_EVERY_S
            entries = len(self.backend.keys("first_seen")) + len(self.backend.keys("tags"))
            with open(self.file + ".new", "w") as out:
                out.write(f"{entries}\n")
            os.replace(self.file + ".new", self.file)


def build(env: sluice.StreamEnvironment) -> None:
    rate = float(env.args.get("rate", "2000"))
    ttl_ms = int(env.args.get("ttl_ms", "10000"))
    probe = env.args["probe"]
    (
        env.from_source(GeneratorSource(lambda i: i, rate=rate), uid="keys")
        .key_by(lambda i: i)
        .process(RememberEachKey(ttl_ms, probe), uid="remember")
        .sink_to(PrintSink(), uid="nothing")  # the job must end in a sink; no record reaches it
    )
