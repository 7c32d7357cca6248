"""Sluice: streaming jobs with Flink's finishing semantics (FLIP-147, FLIP-34), in Python, on Spark."""

from sluice.api.datastream import ConnectedStreams, DataStream, KeyedStream, WindowedStream
from sluice.api.environment import StreamEnvironment
from sluice.functions import (
    AggregateFunction,
    CoProcessFunction,
    FilterFunction,
    FlatMapFunction,
    Function,
    KeyedBroadcastProcessFunction,
    KeyedContext,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    MapFunction,
    ProcessFunction,
    ProcessJoinFunction,
    ProcessWindowFunction,
    RuntimeContext,
    TimerService,
)
from sluice.side_outputs import FailedRecord, OutputTag
from sluice.state.descriptors import ListStateDescriptor, MapStateDescriptor, StateTtl, ValueStateDescriptor
from sluice.watermarks import WatermarkStrategy

__all__ = [
    "AggregateFunction",
    "CoProcessFunction",
    "ConnectedStreams",
    "DataStream",
    "FailedRecord",
    "FilterFunction",
    "FlatMapFunction",
    "Function",
    "KeyedBroadcastProcessFunction",
    "KeyedCoProcessFunction",
    "KeyedContext",
    "KeyedProcessFunction",
    "KeyedStream",
    "ListStateDescriptor",
    "MapFunction",
    "MapStateDescriptor",
    "OutputTag",
    "ProcessFunction",
    "ProcessJoinFunction",
    "ProcessWindowFunction",
    "RuntimeContext",
    "StateTtl",
    "StreamEnvironment",
    "TimerService",
    "ValueStateDescriptor",
    "WatermarkStrategy",
    "WindowedStream",
]
