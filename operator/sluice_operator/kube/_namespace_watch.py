"""Namespaces created while the operator starts are watched too (a gap in kopf 1.45's discovery).

With a namespace pattern (`--namespace 'team-*'`), kopf lists the namespaces once, then starts a watch
on them. That watch lists them again and watches from the second list's resource version, but kopf
ignores what the second list returns, as "already known from the first". A namespace created between
the two lists is in the second one only: it is never added, no StreamJob in it is ever reconciled,
and nothing says so until the operator restarts. The e2e suite found it: a test's namespace created
while its operator started got no status for four minutes, and the next test's namespace worked.

`install` makes the second list count: it is the cluster's namespaces as of the resource version the
watch then starts from, so every namespace is seen either in it or by the watch. Adding a namespace
twice is harmless (kopf keeps a set).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from kopf._core.reactor import observation

_ORIGINAL: Callable[..., Any] = observation.process_discovered_namespace_event


@functools.wraps(_ORIGINAL)
async def _process_namespace_event(*, raw_event: Any, namespaces: Any, insights: Any, **kwargs: Any) -> None:
    if raw_event["type"] is None:  # the watch's own initial listing, which kopf skips
        async with insights.revised:
            observation.revise_namespaces(raw_events=[raw_event], insights=insights, namespaces=namespaces)
            insights.revised.notify_all()
        return
    await _ORIGINAL(raw_event=raw_event, namespaces=namespaces, insights=insights, **kwargs)


def install() -> None:
    """Before `kopf.run`: `namespace_observer` looks the processor up when it starts its watch."""
    observation.process_discovered_namespace_event = _process_namespace_event
