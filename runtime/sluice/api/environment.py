"""The entry point of a pipeline: `build(env)` receives a StreamEnvironment and adds sources to it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.state.keygroups import DEFAULT_MAX_PARALLELISM
from sluice.watermarks import WatermarkStrategy

if TYPE_CHECKING:
    from sluice.api.datastream import DataStream
    from sluice.connectors.base import Source
    from sluice.graph.transformations import Transformation


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
        self.nodes: list[Transformation] = []

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
        from sluice.api.datastream import DataStream
        from sluice.engine.operators.source import SourceOperator

        if watermarks is not None and not isinstance(watermarks, WatermarkStrategy):
            raise TypeError(f"from_source: watermarks must be a sluice.WatermarkStrategy, got {watermarks!r}")
        node = self._add(
            "source", name or uid, uid, lambda u: SourceOperator(u, source, watermarks), [], stateful=True
        )
        return DataStream(self, [(node, None)])

    def _add(
        self, kind: str, name: str, uid: str | None, factory: Any, inputs: list[Any], stateful: bool
    ) -> Transformation:
        from sluice.api._callsite import user_call_site
        from sluice.graph.transformations import Input, Transformation

        node = Transformation(
            id=len(self.nodes),
            kind=kind,
            name=name,
            uid=uid,
            factory=factory,
            inputs=[Input(n, p) for n, p in inputs],
            stateful=stateful,
            location=user_call_site(),
        )
        self.nodes.append(node)
        return node
