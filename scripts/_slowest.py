"""Prints the slowest tests of a `scripts/test.sh` run from its tiers' JUnit XML reports.

pytest's own `--durations` table covers one pytest run; test.sh runs one per tier, so this merges them:
    python scripts/_slowest.py 30 unit.xml integration.xml e2e.xml
With --totals it prints instead one closing line for the whole run, `total: N passed, N failed, N skipped`
(pytest's own summary line covers only the last tier). With --workers it reads the timeline a tier's
tests wrote (SLUICE_TEST_TIMELINE, tests/testkit/timeline.py) and prints, per pytest-xdist worker, how many
seconds it spent in tests and when its last test ended, counted from the tier's first test: a worker
that ends long after the other is the tier's tail.
"""

from __future__ import annotations

import collections
import json
import sys
import xml.etree.ElementTree as ET


def slowest(count: int, reports: list[str]) -> list[tuple[float, str]]:
    timed: list[tuple[float, str]] = []
    for report in reports:
        for case in ET.parse(report).iter("testcase"):
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            timed.append((float(case.get("time") or 0.0), name))
    return sorted(timed, reverse=True)[:count]


def totals(reports: list[str]) -> str:
    passed = failed = skipped = 0
    for report in reports:
        for case in ET.parse(report).iter("testcase"):
            if case.find("skipped") is not None:
                skipped += 1
            elif case.find("failure") is not None or case.find("error") is not None:
                failed += 1
            else:
                passed += 1
    return f"total: {passed} passed, {failed} failed, {skipped} skipped"


def workers(timeline: str) -> str:
    spans: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
    with open(timeline) as lines:
        for line in lines:
            test = json.loads(line)
            spans[test["worker"]].append((float(test["start"]), float(test["end"])))
    if not spans:
        return "no test ran"
    first = min(start for runs in spans.values() for start, _ in runs)
    return "; ".join(
        f"{worker} {len(runs)} tests, {sum(end - start for start, end in runs):.0f}s in tests, "
        f"done at {max(end for _, end in runs) - first:.0f}s"
        for worker, runs in sorted(spans.items())
    )


def main(argv: list[str]) -> None:
    if argv[0] == "--totals":
        print(totals(argv[1:]))
        return
    if argv[0] == "--workers":
        print(workers(argv[1]))
        return
    count, reports = int(argv[0]), argv[1:]
    for seconds, name in slowest(count, reports):
        print(f"{seconds:9.2f}s  {name}")


if __name__ == "__main__":
    main(sys.argv[1:])
