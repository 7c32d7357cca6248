"""Sources and sinks."""

from sluice.connectors.base import (
    Sink,
    SinkWriter,
    Source,
    SplitReader,
    TransactionContext,
    TwoPhaseCommitSink,
)
from sluice.connectors.files import FileSink, FileSource
from sluice.connectors.generator import GeneratorSource
from sluice.connectors.kafka import KafkaRecord, KafkaSink, KafkaSource
from sluice.connectors.postgres import PostgresSink
from sluice.connectors.print_sink import PrintSink
from sluice.connectors.sequence import SequenceSource

__all__ = [
    "FileSink",
    "FileSource",
    "GeneratorSource",
    "KafkaRecord",
    "KafkaSink",
    "KafkaSource",
    "PostgresSink",
    "PrintSink",
    "SequenceSource",
    "Sink",
    "SinkWriter",
    "Source",
    "SplitReader",
    "TransactionContext",
    "TwoPhaseCommitSink",
]
