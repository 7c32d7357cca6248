"""Durations on the command line: 500ms, 1s, 10m, 1h, or plain seconds."""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "": 1.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|)\s*$")


def parse_duration(text: str) -> float:
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration; write it like 500ms, 1s, 10m or 1h")
    return float(match.group(1)) * _UNITS[match.group(2)]
