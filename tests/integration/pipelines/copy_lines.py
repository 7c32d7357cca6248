"""Reads text files line by line and writes [file-line, length] records exactly once. Args: input, out."""

import sluice
from sluice.connectors import FileSink, FileSource


def build(env: sluice.StreamEnvironment) -> None:
    (
        env.from_source(FileSource(env.args["input"]), uid="lines")
        .map(lambda line: [line, len(line)], uid="measure")
        .sink_to(FileSink(env.args["out"]), uid="sink")
    )
