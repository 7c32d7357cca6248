"""Kafka to Kafka, exactly once: orders (JSON) in, per-order totals out, through Kafka transactions.

    scripts/kafka-jars.sh                      # a Kafka 4 broker's jars, once (or use your own broker)
    sluice run examples/kafka_exactly_once.py --arg bootstrap=127.0.0.1:9092 \
        --arg input=orders --arg output=totals --parallelism 2 \
        --checkpoint-dir file:///tmp/chk --checkpoint-interval 10s

Each input record is {"order": id, "items": [{"price": p, "qty": q}, …]}; each output record is
{"order": id, "total": sum of p * q}, keyed by the order id. Output becomes visible to read_committed
consumers when the checkpoint after it completes. With `--arg bounded=1` the job reads what the input
topic holds when it starts and ends; its final checkpoint commits the last transaction.
"""

from typing import Any

import sluice
from sluice.connectors import KafkaSink, KafkaSource


def total(order: dict[str, Any]) -> dict[str, Any]:
    return {"order": order["order"], "total": sum(i["price"] * i["qty"] for i in order["items"])}


def build(env: sluice.StreamEnvironment) -> None:
    bootstrap = env.args["bootstrap"]
    source = KafkaSource(
        bootstrap,
        env.args["input"],
        group_id=env.args.get("group", "sluice-example-totals"),
        bounded=env.args.get("bounded", "0") == "1",
        value_format="json",
    )
    sink = KafkaSink(bootstrap, env.args["output"], value_format="json", key=lambda t: t["order"])
    env.from_source(source, uid="orders").map(total, uid="total").sink_to(sink, uid="totals")
