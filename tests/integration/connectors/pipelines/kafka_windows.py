"""Event time from Kafka timestamps: counts per value and 1 s tumbling window of the records' timestamps.

Args: bootstrap, topic, out. Rows: [value, window start ms, count].
"""

import sluice
from sluice.connectors import FileSink, KafkaSource
from sluice.windows import TumblingEventTimeWindows


def build(env: sluice.StreamEnvironment) -> None:
    source = KafkaSource(
        env.args["bootstrap"], env.args["topic"], bounded=True, value_format="str", with_metadata=True
    )
    (
        env.from_source(source, uid="kafka")
        .assign_timestamps(lambda r: r.timestamp, max_out_of_orderness_ms=0, uid="ts")
        .map(lambda r: (r.value, r.timestamp // 1000 * 1000, 1), uid="row")
        .key_by(lambda row: (row[0], row[1]))
        .window(TumblingEventTimeWindows.of_millis(1000))
        .reduce(lambda a, b: (a[0], a[1], a[2] + b[2]), uid="count")
        .map(list, uid="as-list")
        .sink_to(FileSink(env.args["out"]), uid="files")
    )
