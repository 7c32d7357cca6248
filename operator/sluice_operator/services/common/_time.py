"""Timestamps: the runtime speaks milliseconds since the epoch, Kubernetes speaks RFC 3339."""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(millis: int | float) -> str:
    return datetime.fromtimestamp(millis / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def millis(text: str | None) -> int | None:
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)
