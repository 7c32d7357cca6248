"""Keyed operators: the rolling reduce and the keyed process function with state and timers."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sluice.checkpoint.snapshot import OperatorSnapshot, RestoredState
from sluice.engine._failure_context import index_reached, mark_record
from sluice.engine.context import processing_time_ms
from sluice.engine.operators._udf import DeadLetters, UdfOperator
from sluice.engine.operators.base import StreamOperator
from sluice.engine.timers import TimerService
from sluice.functions import KeyedProcessFunction
from sluice.side_outputs import OutputTag
from sluice.state.keygroups import key_group_for
from sluice.state.snapshots import ChangeLog, DeferredKeyed

_MISSING = object()


class KeyedReduceOperator(StreamOperator):
    """Emits the running reduction of each key after every record."""

    is_keyed = True

    def __init__(
        self, uid: str, key_selector: Callable[[Any], Any], reduce: Callable[[Any, Any], Any]
    ) -> None:
        self.uid = uid
        self.key_selector = key_selector
        self.reduce_fn = reduce
        self.values: dict[Any, Any] = {}

    def initialize_state(self, restored: RestoredState | None) -> None:
        if restored is not None:
            for group in restored.keyed.values():
                self.values.update(group.get("reduce", {}))

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        key_of, reduce, state = self.key_selector, self.reduce_fn, self.values
        out = []
        records = iter(values)
        try:
            for value in records:
                key = key_of(value)
                acc = state.get(key, _MISSING)
                acc = value if acc is _MISSING else reduce(acc, value)
                state[key] = acc
                out.append(acc)
        except Exception as error:
            mark_record(error, values, index_reached(values, records))
            raise
        self.output.emit(out, timestamps)

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot | None:
        if not self.values:
            return None
        mp = self.ctx.max_parallelism
        keyed: dict[int, dict[str, Any]] = {}
        for key, acc in self.values.items():
            keyed.setdefault(key_group_for(key, mp), {"reduce": {}})["reduce"][key] = acc
        return OperatorSnapshot(keyed=keyed)


class _MixedSideOutput(ValueError):
    """Raised through on_error: one tag cannot carry both dead letters and records of ctx.output."""


class KeyedProcessContext:
    """The context handed to process_element / on_timer; one instance reused for every call."""

    __slots__ = ("_op", "key", "time_domain", "timestamp")

    def __init__(self, op: KeyedProcessOperator) -> None:
        self._op = op
        self.key: Any = None
        self.timestamp: int | None = None
        self.time_domain: str | None = None

    @property
    def timer_service(self) -> KeyedProcessContext:
        return self

    def current_watermark(self) -> int:
        return self._op.timers.watermark

    def current_processing_time(self) -> int:
        return processing_time_ms()

    def register_event_time_timer(self, timestamp: int) -> None:
        self._op.timers.event.register(self.key, timestamp)

    def register_processing_time_timer(self, timestamp: int) -> None:
        if not self._op.processing_timers_stopped:
            self._op.timers.processing.register(self.key, timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._op.timers.event.delete(self.key, timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._op.timers.processing.delete(self.key, timestamp)

    def output(self, tag: OutputTag, value: Any) -> None:
        if not isinstance(tag, OutputTag):
            raise TypeError(f"ctx.output needs a sluice.OutputTag as its first argument, got {tag!r}")
        self._op.side_output(tag.name, value, self.timestamp)


class KeyedProcessOperator(UdfOperator):
    is_keyed = True

    def __init__(
        self,
        uid: str,
        key_selector: Callable[[Any], Any],
        fn: KeyedProcessFunction,
        on_error: str | OutputTag = "fail",
    ) -> None:
        self.check_function(uid, fn)
        super().__init__(uid, fn, on_error)
        self._side: dict[str, tuple[list[Any], list[int | None]]] = {}
        """Records for side outputs (`ctx.output`) since the last flush, by tag."""
        self.key_selector = key_selector
        self.timers = TimerService()
        self.processing_timers_stopped = False
        self._context = self.make_context()
        self._changes = ChangeLog()

    def check_function(self, uid: str, fn: Any) -> None:
        if not isinstance(fn, KeyedProcessFunction):
            raise TypeError(
                f"operator {uid!r}: process() on a keyed stream needs a sluice.KeyedProcessFunction"
            )

    def make_context(self) -> KeyedProcessContext:
        return KeyedProcessContext(self)

    def initialize_state(self, restored: RestoredState | None) -> None:
        super().initialize_state(restored)
        if restored is None:
            return
        backend = self.ctx.keyed_backend
        assert backend is not None
        for chain in restored.keyed_chains:
            for name, kind, upserts, removed in chain.frames():
                backend.restore_frame(name, kind, upserts, removed)
        # Checkpoints written before incremental snapshots kept the backend's entries per key group.
        legacy = {g: v["user"] for g, v in restored.keyed.items() if "user" in v}
        backend.restore(legacy)
        shares = restored.keyed_chains
        whole = len(shares) == 1 and shares[0].groups is None and not legacy
        if whole and all(f.shared for f in shares[0].chain):
            # The state is that one chain, whole (the same key groups as before): checkpoints go on
            # writing deltas on it, not a full snapshot of millions of keys first.
            self._changes.extend_restored(shares[0].chain, shares[0].location)
        for group in restored.keyed.values():
            self.timers.restore(group.get("timers", []))

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        self.process_keyed(values, timestamps, self.key_selector, self.fn.process_element)

    def process_keyed(
        self,
        values: list[Any],
        timestamps: list[int] | None,
        key_of: Callable[[Any], Any],
        call: Callable[[Any, Any], Iterable[Any] | None],
    ) -> None:
        """Calls `call(value, ctx)` for each record with its key (by `key_of`) current."""
        backend = self.ctx.keyed_backend
        assert backend is not None
        ctx = self._context
        ctx.time_domain = None
        out: list[Any] = []
        out_ts: list[int] = []
        if self.guarded:
            self._process_guarded(values, timestamps, out, out_ts, key_of, call)
        else:
            i = 0
            try:
                for i, value in enumerate(values):
                    key = key_of(value)
                    backend.current_key = ctx.key = key
                    ts = ctx.timestamp = None if timestamps is None else timestamps[i]
                    produced = call(value, ctx)
                    if produced is not None:
                        self._collect(produced, ts, out, out_ts)
            except Exception as error:
                mark_record(error, values, i)
                raise
        self._flush(out, out_ts, timestamps is not None)

    def _process_guarded(
        self,
        values: list[Any],
        timestamps: list[int] | None,
        out: list[Any],
        out_ts: list[int],
        key_of: Callable[[Any], Any],
        call: Callable[[Any, Any], Iterable[Any] | None],
    ) -> None:
        # The key is taken outside the try: an error in key_by's selector still fails the task. What
        # the function changed in state before it raised stays changed (there is no rollback).
        backend = self.ctx.keyed_backend
        assert backend is not None
        ctx = self._context
        dead = DeadLetters()
        for i, value in enumerate(values):
            key = key_of(value)
            backend.current_key = ctx.key = key
            ts = ctx.timestamp = None if timestamps is None else timestamps[i]
            side_marks = {tag: len(vs) for tag, (vs, _) in self._side.items()}
            try:
                produced = call(value, ctx)
                produced = None if produced is None else list(produced)
            except _MixedSideOutput:
                raise
            except Exception as error:
                self._forget_side_since(side_marks)
                self.reject(value, ts, error, dead)
                continue
            if produced is not None:
                self._collect(produced, ts, out, out_ts)
        self.send_dead_letters(dead)

    def _forget_side_since(self, marks: dict[str, int]) -> None:
        """A record that raised sends nothing, to side outputs neither."""
        for tag, (vs, stamps) in self._side.items():
            keep = marks.get(tag, 0)
            del vs[keep:], stamps[keep:]

    def side_output(self, tag: str, value: Any, timestamp: int | None) -> None:
        if tag == self.dead_letter_tag:
            # Outside the try of on_error: a bug in the pipeline, not a bad record.
            raise _MixedSideOutput(
                f"operator {self.uid!r}: ctx.output to {tag!r}, which is this operator's on_error tag: its "
                "readers expect FailedRecord dead letters only; use another OutputTag name"
            )
        values, stamps = self._side.setdefault(tag, ([], []))
        values.append(value)
        stamps.append(timestamp)

    def _collect(self, produced: Iterable[Any], ts: int | None, out: list[Any], out_ts: list[int]) -> None:
        before = len(out)
        out.extend(produced)
        if ts is not None:
            out_ts.extend([ts] * (len(out) - before))

    def _flush(self, out: list[Any], out_ts: list[int], timed: bool) -> None:
        if out:
            self.output.emit(out, out_ts if timed and len(out_ts) == len(out) else None)
        if self._side:
            side, self._side = self._side, {}
            for tag, (values, stamps) in side.items():
                timed_side = (
                    None if any(ts is None for ts in stamps) else [t for t in stamps if t is not None]
                )
                self.output.emit_side(tag, values, timed_side)

    def process_watermark(self, timestamp: int) -> None:
        if timestamp <= self.timers.watermark:
            return
        firing = _TimerFiring(self, "event")
        self.timers.advance_watermark(timestamp, firing)
        firing.flush()
        self.output.emit_watermark(timestamp)

    def next_processing_timer(self) -> int | None:
        return None if self.processing_timers_stopped else self.timers.processing.peek()

    def on_processing_time(self, now_ms: int) -> None:
        firing = _TimerFiring(self, "processing")
        self.timers.fire_processing(now_ms, firing)
        firing.flush()

    def stop_processing_timers(self) -> None:
        self.processing_timers_stopped = True

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot | None:
        self.ctx.ttl_states.sweep()  # state that expired and is not read any more leaves the snapshot
        snap = super().snapshot_state(checkpoint_id) or OperatorSnapshot()
        backend = self.ctx.keyed_backend
        assert backend is not None
        if backend.has_state():
            # Without the frozen view: the plan opens it, on this thread before any other write, only
            # if the snapshot reads the backend (`sluice.state.snapshots.ChangeLog.plan`).
            snap.deferred = DeferredKeyed(self._changes, backend.begin_snapshot(view=False))
        for group, entries in self.timers.snapshot(self.ctx.max_parallelism).items():
            snap.keyed.setdefault(group, {}).update(entries)
        return None if snap.is_empty() else snap

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self._changes.confirm(checkpoint_id)
        super().notify_checkpoint_complete(checkpoint_id)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._changes.close()
            backend = self.ctx.keyed_backend
            if backend is not None:
                backend.close()


class _TimerFiring:
    """Calls `on_timer` for each due timer and emits what it returns, in batches."""

    def __init__(self, op: KeyedProcessOperator, domain: str) -> None:
        self._op = op
        self._domain = domain
        self._out: list[Any] = []
        self._out_ts: list[int] = []

    def __call__(self, key: Any, timestamp: int) -> None:
        op = self._op
        backend = op.ctx.keyed_backend
        assert backend is not None
        ctx = op._context
        backend.current_key = ctx.key = key
        ctx.timestamp = timestamp
        ctx.time_domain = self._domain
        produced = op.fn.on_timer(timestamp, ctx)
        if produced is not None:
            op._collect(produced, timestamp, self._out, self._out_ts)
            if len(self._out) >= 1024:
                self.flush()

    def flush(self) -> None:
        if self._out or self._op._side:
            self._op._flush(self._out, self._out_ts, True)
            self._out, self._out_ts = [], []
