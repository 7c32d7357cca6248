"""Process-wide state of the handlers: the API clients, the configuration and per-object locks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from sluice_operator.models import OperatorConfig
from sluice_operator.services import Deps


@dataclass(frozen=True)
class Election:
    """How this replica takes part in kopf peering, as the command line said."""

    peering: str
    namespaces: tuple[str, ...]  # exact names; empty for patterns or every namespace
    clusterwide: bool


@dataclass
class Runtime:
    config: OperatorConfig = field(default_factory=OperatorConfig.from_env)
    deps: Deps | None = None
    locks: dict[tuple[str, str], asyncio.Lock] = field(default_factory=dict)
    closing: bool = False  # set at shut-down: daemons still alive then must not start new work
    election: Election | None = None  # None: standalone
    stop_metrics: Callable[[], None] = lambda: None  # stops serving /metrics

    def lock(self, namespace: str, name: str) -> asyncio.Lock:
        # One reconcile per StreamJob at a time, whatever woke it (watch event, daemon, pod, Savepoint).
        return self.locks.setdefault((namespace, name), asyncio.Lock())

    def require(self) -> Deps:
        if self.deps is None:
            raise RuntimeError("the operator has not finished starting")
        return self.deps


RUNTIME = Runtime()
