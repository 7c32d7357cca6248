"""A job whose checkpoints (nearly) never complete while it runs: each record takes 20 ms in a map, records
arrive faster than that, and barriers queue behind them far past any short checkpoint timeout. Its
exactly-once sink therefore keeps pre-committing transactions that no checkpoint commits.

Args: out (FileSink directory) or dsn (PostgresSink into table `numbers (i int)`).
"""

import time

import sluice
from sluice.connectors import FileSink, GeneratorSource, PostgresSink


def _slow(i: int) -> int:
    time.sleep(0.02)
    return i


def build(env: sluice.StreamEnvironment) -> None:
    numbers = env.from_source(GeneratorSource(lambda i: i, splits=2, rate=200.0), uid="gen").map(
        _slow, uid="slow"
    )
    if "dsn" in env.args:
        numbers.map(lambda i: (i,), uid="row").sink_to(
            PostgresSink(env.args["dsn"], "numbers", ["i"]), uid="pg"
        )
    else:
        numbers.sink_to(FileSink(env.args["out"]), uid="files")
