"""Time-to-live of keyed state (processing time, as Flink's default `StateTtlConfig`).

A state declared with `ttl=StateTtl(...)` stores each value (each list element, each map entry) with the
processing time it expires at, inside the backend's own state: expiry is part of every snapshot,
survives restore and rescale, and works the same on both backends. An expired value is never returned.

Expired entries are removed two ways, as Flink's incremental cleanup does:
- lazily: reading an expired value removes it;
- incrementally: every handle keeps a queue of keys by the time they may next expire, and each access
  (and each checkpoint, `sweep`) checks a bounded number of due keys and removes what expired. So a job
  over an ever-new key space keeps a steady state size: keys never seen again still go.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from sluice.state.descriptors import StateTtl
from sluice.state.keyed import KeyedStateBackend, ListState, MapState, ValueState

T = TypeVar("T")
CLEANUP_PER_ACCESS = 4
"""Due keys checked per state access: a small, constant cost per record."""
CLEANUP_PER_SWEEP = 10_000
"""Due keys checked per checkpoint, for state that is not accessed any more."""


class Stamped:
    """A value and the processing time (ms since the epoch) it expires at."""

    __slots__ = ("expires", "value")

    def __init__(self, value: Any, expires: int) -> None:
        self.value = value
        self.expires = expires

    def __reduce__(self) -> tuple[type[Stamped], tuple[Any, int]]:
        return (Stamped, (self.value, self.expires))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stamped) and (self.value, self.expires) == (other.value, other.expires)

    def __hash__(self) -> int:
        return hash(self.expires)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class _Expiry:
    """What the handles of one TTL state share: the backend, the clock and the cleanup queue."""

    def __init__(
        self, backend: KeyedStateBackend, name: str, ttl: StateTtl, clock: Callable[[], int]
    ) -> None:
        self.backend = backend
        self.ttl = ttl.millis
        self.refresh_on_read = ttl.update == "on_read_and_write"
        self.clock = clock
        self._queue: list[tuple[int, int, Any]] = []
        self._queued: dict[Any, int] = {}
        self._sequence = itertools.count()
        self.cleanup_key: Callable[[Any, int], int | None] = lambda key, now: None
        """Removes what expired of `key` at `now`; returns when it next expires, None when it has gone."""
        now = clock()
        # Restored keys (any number): checked from now on, a few per access.
        for key in backend.keys(name):
            self.watch(key, now)

    def watch(self, key: Any, expires: int) -> None:
        if key not in self._queued:
            self._queued[key] = expires
            heapq.heappush(self._queue, (expires, next(self._sequence), key))

    def clean(self, now: int, limit: int) -> None:
        queue = self._queue
        if not queue or queue[0][0] > now:
            return
        backend = self.backend
        current = backend.current_key
        try:
            for _ in range(limit):
                if not queue or queue[0][0] > now:
                    break
                _, _, key = heapq.heappop(queue)
                del self._queued[key]
                backend.current_key = key
                later = self.cleanup_key(key, now)
                if later is not None:
                    self.watch(key, later)
        finally:
            backend.current_key = current


def _live(item: Any, now: int) -> bool:
    return not isinstance(item, Stamped) or item.expires > now


def _unwrap(item: Any) -> Any:
    # State written before the state had a TTL is kept as it is, as if written now.
    return item.value if isinstance(item, Stamped) else item


class TtlValueState(Generic[T]):
    def __init__(self, inner: ValueState[Any], default: T | None, expiry: _Expiry) -> None:
        self._inner, self._default, self._expiry = inner, default, expiry
        expiry.cleanup_key = self._cleanup

    def _cleanup(self, key: Any, now: int) -> int | None:
        stamped = self._inner.value()
        if stamped is None:
            return None
        if not _live(stamped, now):
            self._inner.clear()
            return None
        return stamped.expires if isinstance(stamped, Stamped) else None

    def value(self) -> T | None:
        expiry = self._expiry
        now = expiry.clock()
        expiry.clean(now, CLEANUP_PER_ACCESS)
        stamped = self._inner.value()
        if stamped is None:
            return self._default
        if not _live(stamped, now):
            self._inner.clear()
            return self._default
        value = _unwrap(stamped)
        if expiry.refresh_on_read:
            self._write(value, now)
        return value  # type: ignore[no-any-return]

    def _write(self, value: Any, now: int) -> None:
        expiry = self._expiry
        self._inner.update(Stamped(value, now + expiry.ttl))
        expiry.watch(expiry.backend.current_key, now + expiry.ttl)

    def update(self, value: T) -> None:
        now = self._expiry.clock()
        self._expiry.clean(now, CLEANUP_PER_ACCESS)
        self._write(value, now)

    def clear(self) -> None:
        self._inner.clear()


class TtlListState(Generic[T]):
    """Each element expires on its own (Flink's list state TTL)."""

    def __init__(self, inner: ListState[Any], expiry: _Expiry) -> None:
        self._inner, self._expiry = inner, expiry
        expiry.cleanup_key = self._cleanup

    def _cleanup(self, key: Any, now: int) -> int | None:
        items = self._inner.get()
        live = [item for item in items if _live(item, now)]
        if len(live) != len(items):
            self._inner.update(live)
        stamps = [item.expires for item in live if isinstance(item, Stamped)]
        return min(stamps) if stamps else None

    def _stamp(self, values: list[Any], now: int) -> list[Stamped]:
        expires = now + self._expiry.ttl
        self._expiry.watch(self._expiry.backend.current_key, expires)
        return [Stamped(v, expires) for v in values]

    def get(self) -> list[T]:
        expiry = self._expiry
        now = expiry.clock()
        expiry.clean(now, CLEANUP_PER_ACCESS)
        items = self._inner.get()
        live = [item for item in items if _live(item, now)]
        values = [_unwrap(item) for item in live]
        if expiry.refresh_on_read and values:
            self._inner.update(self._stamp(values, now))
        elif len(live) != len(items):
            self._inner.update(live)
        return values

    def add(self, value: T) -> None:
        now = self._expiry.clock()
        self._expiry.clean(now, CLEANUP_PER_ACCESS)
        self._inner.add(self._stamp([value], now)[0])

    def add_all(self, values: list[T]) -> None:
        if values:
            now = self._expiry.clock()
            self._inner.add_all(self._stamp(list(values), now))

    def update(self, values: list[T]) -> None:
        now = self._expiry.clock()
        self._inner.update(self._stamp(list(values), now) if values else [])

    def clear(self) -> None:
        self._inner.clear()


class TtlMapState:
    """Each entry expires on its own (Flink's map state TTL)."""

    def __init__(self, inner: MapState, expiry: _Expiry) -> None:
        self._inner, self._expiry = inner, expiry
        expiry.cleanup_key = self._cleanup

    def _cleanup(self, key: Any, now: int) -> int | None:
        stamps = []
        for k, item in self._inner.items():
            if not _live(item, now):
                self._inner.remove(k)
            elif isinstance(item, Stamped):
                stamps.append(item.expires)
        return min(stamps) if stamps else None

    def _now(self) -> int:
        now = self._expiry.clock()
        self._expiry.clean(now, CLEANUP_PER_ACCESS)
        return now

    def _read(self, key: Any, now: int) -> Any:
        item = self._inner.get(key, _ABSENT)
        if item is _ABSENT:
            return _ABSENT
        if not _live(item, now):
            self._inner.remove(key)
            return _ABSENT
        value = _unwrap(item)
        if self._expiry.refresh_on_read:
            self._put(key, value, now)
        return value

    def _put(self, key: Any, value: Any, now: int) -> None:
        expiry = self._expiry
        self._inner.put(key, Stamped(value, now + expiry.ttl))
        expiry.watch(expiry.backend.current_key, now + expiry.ttl)

    def get(self, key: Any, default: Any = None) -> Any:
        value = self._read(key, self._now())
        return default if value is _ABSENT else value

    def put(self, key: Any, value: Any) -> None:
        self._put(key, value, self._now())

    def contains(self, key: Any) -> bool:
        return self._read(key, self._now()) is not _ABSENT

    def remove(self, key: Any) -> None:
        self._inner.remove(key)

    def items(self) -> list[tuple[Any, Any]]:
        now = self._now()
        out = []
        for key, item in self._inner.items():
            if _live(item, now):
                out.append((key, _unwrap(item)))
            else:
                self._inner.remove(key)
        if self._expiry.refresh_on_read:
            for key, value in out:
                self._put(key, value, now)
        return out

    def keys(self) -> list[Any]:
        return [k for k, _ in self.items()]

    def values(self) -> list[Any]:
        return [v for _, v in self.items()]

    def is_empty(self) -> bool:
        return not self.items()

    def clear(self) -> None:
        self._inner.clear()


_ABSENT: Any = object()


class TtlStates:
    """The TTL states of one operator subtask, for the sweep at each checkpoint."""

    def __init__(self, clock: Callable[[], int] = now_ms) -> None:
        self.clock = clock
        self._expiries: list[_Expiry] = []

    def expiry(self, backend: KeyedStateBackend, name: str, ttl: StateTtl) -> _Expiry:
        expiry = _Expiry(backend, name, ttl, self.clock)
        self._expiries.append(expiry)
        return expiry

    def sweep(self) -> None:
        now = self.clock()
        for expiry in self._expiries:
            expiry.clean(now, CLEANUP_PER_SWEEP)
