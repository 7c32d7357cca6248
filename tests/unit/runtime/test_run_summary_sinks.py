"""Where the run summary says a sink's output went."""

from __future__ import annotations

from sluice._summary import describe_sink
from sluice.connectors import FileSink, PrintSink


def test_a_file_sink_is_its_uri() -> None:
    assert describe_sink(FileSink("/data/out")) == "file:///data/out (FileSink)"


def test_a_print_sink_is_standard_output() -> None:
    assert describe_sink(PrintSink()) == "standard output (PrintSink)"


def test_a_sink_that_says_nothing_of_where_is_its_type() -> None:
    class Custom:
        pass

    assert describe_sink(Custom()) == "Custom"
