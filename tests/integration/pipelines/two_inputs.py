"""Two-input operators for the SIGKILL tests (tests/integration/runtime/test_two_input_kills.py).

Args: out (required), kind (broadcast, coprocess, interval or window), count, rate, keys.
Left record i is (i % keys, i) at 2 i ms, right record i is (i % keys, i) at 3 i + 1 ms, each from its
own rate-limited generator. broadcast: the left records keyed, checked against a bounded rules input
(rule k = k * 10) that finishes first; each record is held until the watermark passes it, so every
record meets every rule. coprocess: the left records and a bounded dimension input (key k's value
k * 10) that finishes first, connected and keyed, into a keyed co-process operator; a record waits in
keyed state until its key's value has come, and each dimension record also emits a marker
["dimension", k], so a replayed dimension shows as a repeated marker. interval: pairs with
lt - 7 <= rt <= lt + 4. window: pairs of one key in 60 ms windows sliding by 20 ms.
"""

from typing import Any

import sluice
from sluice.connectors import FileSink, GeneratorSource, SequenceSource
from sluice.windows import SlidingEventTimeWindows


class ApplyRules(sluice.KeyedBroadcastProcessFunction):
    def open(self, ctx: sluice.RuntimeContext) -> None:
        self.held = ctx.get_map_state(sluice.MapStateDescriptor("held"))

    def process_element(self, value: Any, ctx: Any) -> None:
        self.held.put(ctx.timestamp, value)
        ctx.timer_service.register_event_time_timer(ctx.timestamp)

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.broadcast_state("rules")[value[0]] = value[1]

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        event = self.held.get(timestamp)
        self.held.remove(timestamp)
        return [[event[1], ctx.broadcast_state("rules")[ctx.key]]]


class Enrich(sluice.KeyedCoProcessFunction):
    """Input 1: the left records, input 2: the dimension (k, k * 10), both keyed by k."""

    def open(self, ctx: sluice.RuntimeContext) -> None:
        self.value = ctx.get_state(sluice.ValueStateDescriptor("value"))
        self.waiting = ctx.get_list_state(sluice.ListStateDescriptor("waiting"))

    def process_element1(self, value: Any, ctx: sluice.KeyedContext) -> Any:
        known = self.value.value()
        if known is None:
            self.waiting.add(value)
            return None
        return [[value[1], known]]

    def process_element2(self, value: Any, ctx: sluice.KeyedContext) -> Any:
        self.value.update(value[1])
        held = self.waiting.get()
        self.waiting.clear()
        return [["dimension", value[0]], *([e[1], value[1]] for e in held)]


def build(env: sluice.StreamEnvironment) -> None:
    kind = env.args["kind"]
    count = int(env.args.get("count", "20000"))
    rate = float(env.args.get("rate", "0")) or None
    keys = int(env.args.get("keys", "12"))
    left = env.from_source(
        GeneratorSource(lambda i: (i % keys, i), count=count, rate=rate),
        uid="left",
        watermarks=sluice.WatermarkStrategy(lambda e: e[1] * 2),
    )
    if kind in ("interval", "window"):
        right = env.from_source(
            GeneratorSource(lambda i: (i % keys, i), count=count, rate=rate),
            uid="right",
            watermarks=sluice.WatermarkStrategy(lambda e: e[1] * 3 + 1),
        )
    if kind == "broadcast":
        rules = env.from_source(SequenceSource(0, keys), uid="rules").map(lambda k: (k, k * 10), uid="rule")
        out = left.key_by(lambda e: e[0]).connect(rules.broadcast()).process(ApplyRules(), uid="apply")
    elif kind == "coprocess":
        dimension = env.from_source(SequenceSource(0, keys), uid="dimension").map(
            lambda k: (k, k * 10), uid="dimension-rows"
        )
        out = left.connect(dimension).key_by(lambda e: e[0], lambda d: d[0]).process(Enrich(), uid="enrich")
    elif kind == "interval":
        out = (
            left.key_by(lambda e: e[0])
            .interval_join(right.key_by(lambda e: e[0]))
            .between(-7, 4)
            .process(lambda x, y: [x[1], y[1]], uid="join")
        )
    else:
        out = (
            left.join(right)
            .where(lambda e: e[0])
            .equal_to(lambda e: e[0])
            .window(SlidingEventTimeWindows.of_millis(60, 20))
            .apply(lambda x, y: [x[1], y[1]], uid="join")
        )
    out.sink_to(FileSink(env.args["out"]), uid="sink")
