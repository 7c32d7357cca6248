"""Sessionization: user activity into per-user sessions, with dead letters and late data.

    sluice run examples/sessionization.py --arg n=200000 --arg out=/tmp/sessions \
        --parallelism 2 --checkpoint-dir file:///tmp/chk --checkpoint-interval 1s

Input: lines "user,timestamp_ms,page", as a click stream delivers them; some are malformed (they go to
the `malformed` dead-letter output with their error instead of failing the job), some arrive very late
(they go to the `late` output instead of being dropped). A session is a user's activity with no pause
longer than 1.5 s; a record up to 1 s late still updates its session (which then fires again).

Outputs under `out`: sessions/ ([user, start, end, clicks, distinct pages]), malformed/ ([line, error])
and late/ ([user, timestamp, page]), each exactly once.
"""

from collections.abc import Iterator
from typing import Any

import sluice
from sluice.connectors import FileSink, GeneratorSource
from sluice.windows import EventTimeSessionWindows, TimeWindow

MALFORMED = sluice.OutputTag("malformed")
LATE = sluice.OutputTag("late")
USERS = 50


def click(i: int) -> str:
    """Click i of a synthetic stream: every user clicks once a second, pausing 5 s every 2000 clicks."""
    user, page = i % USERS, f"/page/{i % 7}"
    if i % 97 == 13:
        return f"user-{user};{i};{page}"  # a broken producer: wrong separator
    timestamp = i * 20 + (i // 2000) * 5000
    if i % 500 == 250 and i > 10_000:
        timestamp = user  # replayed from long ago: too late for any open session
    return f"user-{user},{timestamp},{page}"


def parse(line: str) -> tuple[str, int, str]:
    user, timestamp, page = line.split(",")
    return user, int(timestamp), page


class SessionSummary(sluice.ProcessWindowFunction):
    def process(self, key: Any, window: TimeWindow, elements: list[Any]) -> Iterator[Any]:
        yield [key, window.start, window.end, len(elements), len({page for _, _, page in elements})]


def build(env: sluice.StreamEnvironment) -> None:
    n = int(env.args.get("n", "100000"))
    out = env.args["out"].rstrip("/")
    # One ordered click log, read, parsed and stamped in order by one subtask: how late a click is then
    # depends on the data, not on which of two parsers happened to run ahead. The sessions run at the
    # job's parallelism.
    clicks = env.from_source(GeneratorSource(click, count=n), uid="clicks").set_parallelism(1)
    parsed = clicks.map(parse, uid="parse", on_error=MALFORMED).set_parallelism(1)
    parsed.get_side_output(MALFORMED).map(lambda failed: [failed.value, failed.error]).sink_to(
        FileSink(f"{out}/malformed"), uid="malformed-sink"
    )
    sessions = (
        parsed.assign_timestamps(lambda c: c[1], max_out_of_orderness_ms=200, uid="ts")
        .set_parallelism(1)
        .key_by(lambda c: c[0])
        .window(EventTimeSessionWindows.with_gap_millis(1500))
        .allowed_lateness_millis(1000)
        .side_output_late_data(LATE)
        .process(SessionSummary(), uid="sessions")
    )
    sessions.sink_to(FileSink(f"{out}/sessions"), uid="sessions-sink")
    sessions.get_side_output(LATE).sink_to(FileSink(f"{out}/late"), uid="late-sink")
