"""Per-partition event time: [value, window start, count] per 1 s window from a Kafka topic whose
timestamps are the event times, with the watermark strategy on the source (one watermark per partition).

Args: bootstrap, topic, out; bounded (0/1, default 1); idleness_ms (default none).
"""

import sluice
from sluice.connectors import FileSink, KafkaSource
from sluice.windows import TumblingEventTimeWindows


def build(env: sluice.StreamEnvironment) -> None:
    idleness = env.args.get("idleness_ms")
    source = KafkaSource(
        env.args["bootstrap"],
        env.args["topic"],
        bounded=env.args.get("bounded", "1") == "1",
        value_format="str",
        with_metadata=True,
    )
    (
        env.from_source(
            source,
            uid="kafka",
            watermarks=sluice.WatermarkStrategy(
                lambda r: r.timestamp, idleness_ms=int(idleness) if idleness else None
            ),
        )
        .map(lambda r: (r.value, r.timestamp // 1000 * 1000, 1), uid="row")
        .key_by(lambda row: (row[0], row[1]))
        .window(TumblingEventTimeWindows.of_millis(1000))
        .reduce(lambda a, b: (a[0], a[1], a[2] + b[2]), uid="count")
        .map(list, uid="as-list")
        .sink_to(FileSink(env.args["out"]), uid="files")
    )
