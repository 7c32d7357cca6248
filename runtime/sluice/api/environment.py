"""The entry point of a pipeline: `build(env)` receives a StreamEnvironment and adds sources to it."""

from __future__ import annotations

from typing import Any

from sluice.api._graph import PipelineGraph
from sluice.api.datastream import DataStream
from sluice.connectors.base import Source
from sluice.engine.operators.source import SourceOperator
from sluice.graph.transformations import Transformation
from sluice.state.keygroups import DEFAULT_MAX_PARALLELISM
from sluice.watermarks import WatermarkStrategy


class StreamEnvironment:
    def __init__(
        self,
        args: dict[str, str] | None = None,
        parallelism: int = 1,
        max_parallelism: int = DEFAULT_MAX_PARALLELISM,
    ) -> None:
        if parallelism < 1:
            raise ValueError(f"parallelism must be at least 1, got {parallelism}")
        if max_parallelism < parallelism:
            raise ValueError(
                f"max parallelism ({max_parallelism}) must be at least the parallelism ({parallelism})"
            )
        self.args: dict[str, str] = dict(args or {})
        self.parallelism = parallelism
        self.max_parallelism = max_parallelism
        self._graph = PipelineGraph()

    @property
    def nodes(self) -> list[Transformation]:
        """The operators the pipeline added so far, in order: what the job graph is built from."""
        return self._graph.nodes

    def set_parallelism(self, parallelism: int) -> StreamEnvironment:
        if parallelism < 1:
            raise ValueError(f"parallelism must be at least 1, got {parallelism}")
        self.parallelism = parallelism
        return self

    def from_source(
        self,
        source: Source[Any],
        uid: str,
        name: str | None = None,
        watermarks: WatermarkStrategy | None = None,
    ) -> DataStream:
        """A stream of `source`'s records; with `watermarks`, timestamped and with a watermark per split
        (see `sluice.watermarks`)."""
        if watermarks is not None and not isinstance(watermarks, WatermarkStrategy):
            raise TypeError(f"from_source: watermarks must be a sluice.WatermarkStrategy, got {watermarks!r}")
        node = self._graph.add(
            "source", name or uid, uid, lambda u: SourceOperator(u, source, watermarks), [], stateful=True
        )
        return DataStream(self._graph, [(node, None)])
