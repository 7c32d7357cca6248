"""Sluice: streaming jobs with Flink's finishing semantics (FLIP-147, FLIP-34), in Python, on Spark."""

from sluice.api.datastream import DataStream, KeyedStream
from sluice.api.environment import StreamEnvironment
from sluice.api.windowed import WindowedStream
from sluice.functions import (
    AggregateFunction,
    FilterFunction,
    FlatMapFunction,
    Function,
    KeyedContext,
    KeyedProcessFunction,
    MapFunction,
    ProcessFunction,
    ProcessWindowFunction,
    RuntimeContext,
    TimerService,
)
from sluice.side_outputs import FailedRecord, OutputTag
from sluice.state.descriptors import ListStateDescriptor, MapStateDescriptor, StateTtl, ValueStateDescriptor
from sluice.watermarks import WatermarkStrategy

__all__ = [
    "AggregateFunction",
    "DataStream",
    "FailedRecord",
    "FilterFunction",
    "FlatMapFunction",
    "Function",
    "KeyedContext",
    "KeyedProcessFunction",
    "KeyedStream",
    "ListStateDescriptor",
    "MapFunction",
    "MapStateDescriptor",
    "OutputTag",
    "ProcessFunction",
    "ProcessWindowFunction",
    "RuntimeContext",
    "StateTtl",
    "StreamEnvironment",
    "TimerService",
    "ValueStateDescriptor",
    "WatermarkStrategy",
    "WindowedStream",
]
