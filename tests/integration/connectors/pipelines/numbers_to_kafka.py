"""Writes the numbers 0 … count-1 (JSON) to a Kafka topic through KafkaSink, keyed by the number % 7.

Args: bootstrap, topic, count, rate (default 5000), delivery (default exactly-once).
"""

import sluice
from sluice.connectors import GeneratorSource, KafkaSink


def build(env: sluice.StreamEnvironment) -> None:
    source = GeneratorSource(
        lambda i: i, splits=2, rate=float(env.args.get("rate", "5000")), count=int(env.args["count"])
    )
    sink = KafkaSink(
        env.args["bootstrap"],
        env.args["topic"],
        value_format="json",
        key=lambda i: i % 7,
        delivery=env.args.get("delivery", "exactly-once"),  # type: ignore[arg-type]
    )
    env.from_source(source, uid="numbers").sink_to(sink, uid="kafka")
