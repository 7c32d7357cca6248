"""W5 on Sluice: W1's windows from a Kafka topic to a Kafka topic (bench/kafka.py runs it).

    sluice run bench/_kafka_w5.py --arg bootstrap=HOST:PORT --arg input=TOPIC --arg output=TOPIC \
        --arg delivery=exactly-once|at-least-once --parallelism 2 \
        --checkpoint-dir file:///tmp/chk --checkpoint-interval 1s

Input records are JSON events {"key", "ts_ms", "v"} (W1's shape). Event time is `ts_ms`, given to the
source so that every partition keeps its own watermark; the source is bounded (it reads what the topic
holds when the job starts), so its end sends the final watermark and every window is emitted. Output
records are JSON {"key", "window_start_ms", "count", "sum_v"}, keyed by `key`.
"""

from typing import Any, Literal

import sluice
from sluice.connectors import KafkaSink, KafkaSource
from sluice.windows import TumblingEventTimeWindows

WINDOW_MS = 1000


def _delivery(arg: str) -> Literal["exactly-once", "at-least-once"]:
    if arg == "exactly-once":
        return "exactly-once"
    if arg == "at-least-once":
        return "at-least-once"
    raise ValueError(f"--arg delivery={arg}: expected exactly-once or at-least-once")


def build(env: sluice.StreamEnvironment) -> None:
    servers = env.args["bootstrap"]
    source = KafkaSource(servers, env.args["input"], bounded=True, value_format="json")
    sink = KafkaSink(
        servers,
        env.args["output"],
        value_format="json",
        key=lambda w: w["key"],
        delivery=_delivery(env.args.get("delivery", "exactly-once")),
    )
    (
        env.from_source(
            source,
            uid="events",
            # Each partition is in event-time order (bench/kafka.py fills it so): no out-of-orderness.
            watermarks=sluice.WatermarkStrategy(lambda e: e["ts_ms"], max_out_of_orderness_ms=0),
        )
        # (key, window start, count, sum of v): the window start travels with the partial aggregate.
        .map(lambda e: (e["key"], e["ts_ms"] - e["ts_ms"] % WINDOW_MS, 1, e["v"]), uid="ones")
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of_millis(WINDOW_MS))
        .reduce(lambda a, b: (a[0], a[1], a[2] + b[2], a[3] + b[3]), uid="count")
        .map(_as_json, uid="json")
        .sink_to(sink, uid="out")
    )


def _as_json(w: tuple[int, int, int, int]) -> dict[str, Any]:
    return {"key": w[0], "window_start_ms": w[1], "count": w[2], "sum_v": w[3]}
