"""Prints records to standard output: for demos, not exactly-once."""

from __future__ import annotations

import sys
from typing import Any

from sluice.connectors.base import Sink, SinkWriter


class PrintSink(Sink):
    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix

    def create_writer(self, subtask_index: int, parallelism: int) -> SinkWriter:
        tag = f"{self.prefix}{subtask_index}> " if parallelism > 1 else self.prefix
        return _PrintWriter(tag)


class _PrintWriter(SinkWriter):
    def __init__(self, tag: str) -> None:
        self.tag = tag

    def write(self, values: list[Any], timestamps: list[int] | None) -> None:
        sys.stdout.write("".join(f"{self.tag}{v!r}\n" for v in values))

    def flush(self) -> None:
        sys.stdout.flush()
