"""Dead letters and a process function's side output, each into its own transactional FileSink.

Args: out (required: a directory; main/, dead/, big/ and big-counts/ go under it), count, rate, keys.
Record i is parsed by a map that raises for every i % 7 == 3 (a dead letter, kept by on_error=tag);
the parsed records are counted per key by a keyed process function that sends every value >= 1000 to
the side output "big" as well; the big ones are also counted per key in 1 s event-time windows, so a
side output feeds a second keyed stateful operator. Record i has timestamp i * 10 ms.
"""

from collections.abc import Iterator
from typing import Any

import sluice
from sluice.connectors import FileSink, GeneratorSource
from sluice.windows import TumblingEventTimeWindows

BAD = sluice.OutputTag("bad-records")
BIG = sluice.OutputTag("big")


def parse(i: int) -> tuple[int, int]:
    if i % 7 == 3:
        raise ValueError(f"record {i} is malformed")
    return (i % KEYS, i)


KEYS = 20


class CountAndSplit(sluice.KeyedProcessFunction):
    def open(self, ctx: sluice.RuntimeContext) -> None:
        self.count = ctx.get_state(sluice.ValueStateDescriptor("count", default=0))

    def process_element(self, value: Any, ctx: sluice.KeyedContext) -> Iterator[Any]:
        count = (self.count.value() or 0) + 1
        self.count.update(count)
        if value[1] >= 1000:
            ctx.output(BIG, value)
        yield (ctx.key, value[1], count)


def build(env: sluice.StreamEnvironment) -> None:
    out = env.args["out"].rstrip("/")
    count = int(env.args.get("count", "20000"))
    stamped = env.from_source(
        GeneratorSource(lambda i: i, count=count, splits=2, rate=float(env.args.get("rate", "0")) or None),
        uid="gen",
        watermarks=sluice.WatermarkStrategy(lambda i: i * 10, max_out_of_orderness_ms=100),
    )
    parsed = stamped.map(parse, uid="parse", on_error=BAD)
    parsed.get_side_output(BAD).map(lambda f: [f.value, f.error, f.operator_uid]).sink_to(
        FileSink(f"{out}/dead"), uid="dead-sink"
    )
    counted = parsed.key_by(lambda r: r[0]).process(CountAndSplit(), uid="split")
    counted.sink_to(FileSink(f"{out}/main"), uid="main-sink")
    big = counted.get_side_output(BIG)
    big.sink_to(FileSink(f"{out}/big"), uid="big-sink")
    (
        big.map(lambda r: (r[0], 1))
        .key_by(lambda r: r[0])
        .window(TumblingEventTimeWindows.of_millis(1000))
        .reduce(lambda a, b: (a[0], a[1] + b[1]), uid="big-counts")
        .sink_to(FileSink(f"{out}/big-counts"), uid="big-counts-sink")
    )
