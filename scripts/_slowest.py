"""Prints the slowest tests of a `scripts/test.sh` run from its tiers' JUnit XML reports.

pytest's own `--durations` table covers one pytest run; test.sh runs one per tier, so this merges them:
    python scripts/_slowest.py 30 unit.xml integration.xml e2e.xml
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET


def slowest(count: int, reports: list[str]) -> list[tuple[float, str]]:
    timed: list[tuple[float, str]] = []
    for report in reports:
        for case in ET.parse(report).iter("testcase"):
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            timed.append((float(case.get("time") or 0.0), name))
    return sorted(timed, reverse=True)[:count]


def main(argv: list[str]) -> None:
    count, reports = int(argv[0]), argv[1:]
    for seconds, name in slowest(count, reports):
        print(f"{seconds:9.2f}s  {name}")


if __name__ == "__main__":
    main(sys.argv[1:])
