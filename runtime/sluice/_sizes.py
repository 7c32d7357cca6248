"""Sizes on the command line: 65536, 512KiB, 64MiB, 1GiB (binary units; KB/MB/GB mean the same)."""

from __future__ import annotations

import re

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a size; write it like 65536, 512KiB, 64MiB or 1GiB")
    value = int(match.group(1)) * _UNITS[match.group(2).lower()]
    if value <= 0:
        raise ValueError(f"a size must be positive, not {text!r}")
    return value
