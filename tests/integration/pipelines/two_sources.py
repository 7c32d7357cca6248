"""A short bounded source and a long rate-limited one feeding one sink, for finished-source recovery.

Args: out (required), short (records), count, rate (of the long source), variant ("a" by default;
"b" adds a new running source in front of the sink that in variant "a" finished with the short source).
Output: the raw records, ["short", i] and ["long", i], exactly once.
"""

import sluice
from sluice.connectors import FileSink, GeneratorSource, SequenceSource


def build(env: sluice.StreamEnvironment) -> None:
    short = env.from_source(SequenceSource(0, int(env.args.get("short", "1000"))), uid="short")
    tagged_short = short.map(lambda i: ("short", i), uid="tag-short")
    if env.args.get("variant", "a") == "b":
        extra = env.from_source(GeneratorSource(lambda i: ("extra", i), count=10), uid="extra")
        tagged_short.union(extra).sink_to(FileSink(env.args["out"] + "/short"), uid="short-sink")
    else:
        tagged_short.rebalance().sink_to(FileSink(env.args["out"] + "/short"), uid="short-sink")
    count, rate = int(env.args.get("count", "40000")), float(env.args.get("rate", "10000"))
    (
        env.from_source(GeneratorSource(lambda i: i, splits=2, rate=rate, count=count), uid="long")
        .map(lambda i: ("long", i), uid="tag-long")
        .sink_to(FileSink(env.args["out"] + "/long"), uid="long-sink")
    )
