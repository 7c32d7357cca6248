"""The view an operator (and the user function inside it) has of its subtask."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sluice.engine._task_metrics import WaitClock
from sluice.state.backends import create_backend
from sluice.state.descriptors import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from sluice.state.keyed import KeyedStateBackend, ListState, MapState, ValueState
from sluice.state.operator_state import OperatorStateStore
from sluice.state.ttl import TtlListState, TtlMapState, TtlStates, TtlValueState


class Metrics:
    """Counters and clocks a subtask reports to the coordinator with every heartbeat.

    Everything is cumulative (counts, nanoseconds) so that a lost or late heartbeat loses nothing: the
    coordinator derives rates from the difference of two samples (`sluice.coordinator.metrics`).
    """

    __slots__ = (
        "_ended_ns",
        "_started_ns",
        "backpressure",
        "dead_letters",
        "idle",
        "late_records_dropped",
        "late_records_refired",
        "late_records_side_output",
        "probe",
        "records_in",
        "records_out",
        "records_skipped",
    )

    def __init__(self) -> None:
        self.records_in = 0
        self.records_out = 0
        self.late_records_dropped = 0
        """Records later than their window's allowed lateness, with no late-data side output."""
        self.late_records_refired = 0
        """Late records within the allowed lateness: each one fired its window again."""
        self.late_records_side_output = 0
        """Records too late for their window, sent to its late-data side output."""
        self.records_skipped = 0
        """Records that made a user function raise, dropped (on_error="skip")."""
        self.dead_letters = 0
        """Records that made a user function raise, sent to its on_error side output."""
        self.idle = WaitClock()
        """Waiting for input."""
        self.backpressure = WaitClock()
        """Waiting for room in a full output channel."""
        self.probe: Callable[[], tuple[int | None, int, int]] | None = None
        """Set by the subtask: (input watermark or None, events queued in its input channels, their
        capacity); read when a heartbeat is sent."""
        self._started_ns = time.monotonic_ns()
        self._ended_ns = 0

    def ended(self) -> None:
        """The subtask is done: its clocks stop, so its rates fall to zero instead of counting busy time."""
        if not self._ended_ns:
            self.idle.stop()
            self.backpressure.stop()
            self._ended_ns = time.monotonic_ns()

    def as_dict(self) -> dict[str, int | None]:
        now = self._ended_ns or time.monotonic_ns()
        watermark, queued, capacity = self.probe() if self.probe is not None else (None, 0, 0)
        return {
            "recordsIn": self.records_in,
            "recordsOut": self.records_out,
            "lateRecordsDropped": self.late_records_dropped,
            "lateRecordsRefired": self.late_records_refired,
            "lateRecordsSideOutput": self.late_records_side_output,
            "recordsSkipped": self.records_skipped,
            "deadLetters": self.dead_letters,
            "timeNs": now - self._started_ns,
            "idleNs": self.idle.read(now),
            "backpressuredNs": self.backpressure.read(now),
            "inputWatermark": watermark,
            "inputQueueLength": queued,
            "inputQueueCapacity": capacity,
        }


def processing_time_ms() -> int:
    return time.time_ns() // 1_000_000


class OperatorContext:
    def __init__(
        self,
        *,
        operator_uid: str,
        subtask_index: int,
        parallelism: int,
        max_parallelism: int,
        attempt: int,
        metrics: Metrics,
        keyed: bool,
        job_id: str = "",
        attempt_token: str = "",
        state_backend: str = "heap",
    ) -> None:
        self.job_id = job_id
        self.attempt_token = attempt_token
        self._uid = operator_uid
        self._index = subtask_index
        self._parallelism = parallelism
        self._max_parallelism = max_parallelism
        self._attempt = attempt
        self.metrics = metrics
        self.keyed_backend = (
            create_backend(state_backend, max_parallelism, f"{operator_uid}-{subtask_index}")
            if keyed
            else None
        )
        self.operator_state = OperatorStateStore()
        self.ttl_states = TtlStates()
        """States declared with a TTL: swept for expired entries at each checkpoint."""

    @property
    def subtask_index(self) -> int:
        return self._index

    @property
    def parallelism(self) -> int:
        return self._parallelism

    @property
    def max_parallelism(self) -> int:
        return self._max_parallelism

    @property
    def operator_uid(self) -> str:
        return self._uid

    @property
    def attempt(self) -> int:
        return self._attempt

    def _backend(self, what: str) -> KeyedStateBackend:
        if self.keyed_backend is None:
            raise RuntimeError(
                f"operator {self._uid!r} asked for keyed {what} state but is not keyed: "
                "use key_by(...) before process(...) to get keyed state"
            )
        return self.keyed_backend

    def get_state(self, descriptor: ValueStateDescriptor[Any]) -> ValueState[Any]:
        backend = self._backend("value")
        if descriptor.ttl is None:
            return backend.value_state(descriptor)
        inner: ValueState[Any] = backend.value_state(ValueStateDescriptor(descriptor.name))
        expiry = self.ttl_states.expiry(backend, descriptor.name, descriptor.ttl)
        return TtlValueState(inner, descriptor.default, expiry)

    def get_list_state(self, descriptor: ListStateDescriptor[Any]) -> ListState[Any]:
        backend = self._backend("list")
        if descriptor.ttl is None:
            return backend.list_state(descriptor)
        inner_list: ListState[Any] = backend.list_state(ListStateDescriptor(descriptor.name))
        return TtlListState(inner_list, self.ttl_states.expiry(backend, descriptor.name, descriptor.ttl))

    def get_map_state(self, descriptor: MapStateDescriptor) -> MapState:
        backend = self._backend("map")
        if descriptor.ttl is None:
            return backend.map_state(descriptor)
        inner = backend.map_state(MapStateDescriptor(descriptor.name))
        return TtlMapState(inner, self.ttl_states.expiry(backend, descriptor.name, descriptor.ttl))

    def get_operator_list_state(self, name: str) -> list[Any]:
        return self.operator_state.list_state(name)

    def get_union_list_state(self, name: str) -> list[Any]:
        return self.operator_state.union_list_state(name)

    def get_broadcast_state(self, name: str) -> dict[Any, Any]:
        return self.operator_state.broadcast_state(name)

    def current_processing_time(self) -> int:
        return processing_time_ms()
