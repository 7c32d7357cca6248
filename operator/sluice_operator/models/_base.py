"""Shared building blocks of the resource models: camelCase wire names, durations, URIs, quantities.

Every constrained string carries two validations that say the same thing: a pydantic validator (the
operator's own check, run before it acts) and an `x-kubernetes-validations` CEL rule with a message, so
that `kubectl apply` rejects the value with a sentence a user understands instead of a regex.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

DURATION_RE = re.compile(r"^([0-9]+)(ms|s|m|h)$")
DURATION_HINT = "a duration such as 500ms, 30s, 5m or 1h (a whole number followed by ms, s, m or h)"
URI_RE = re.compile(r"^(/|[a-z][a-z0-9+.-]*://).+$")
URI_HINT = (
    "an absolute path or a URI with a scheme, such as s3://bucket/prefix, gs://bucket/prefix or file:///data"
)
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
NAME_HINT = (
    "a Kubernetes object name: lower-case letters, digits and '-', starting and ending with a letter or digit"
)

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


class CamelModel(BaseModel):
    """Wire names are camelCase like every Kubernetes API; unknown fields are an error, not ignored."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", use_enum_values=False
    )


class StatusModel(BaseModel):
    """Status parts tolerate unknown fields: an older operator must be able to read a newer status."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


def duration_ms(value: str) -> int:
    """Milliseconds of a duration string in the runtime CLI's format (`500ms`, `10s`, `5m`, `1h`)."""
    match = DURATION_RE.match(value)
    if match is None:
        raise ValueError(f"{value!r} is not {DURATION_HINT}")
    return int(match.group(1)) * _UNITS_MS[match.group(2)]


def _check_duration(value: str) -> str:
    duration_ms(value)
    return value


def _check_uri(value: str) -> str:
    if not URI_RE.match(value):
        raise ValueError(f"{value!r} is not {URI_HINT}")
    return value


def _check_name(value: str) -> str:
    if len(value) > 63 or not NAME_RE.match(value):
        raise ValueError(f"{value!r} is not {NAME_HINT} (at most 63 characters)")
    return value


def _cel(rule: str, message: str) -> dict[str, Any]:
    return {"x-kubernetes-validations": [{"rule": rule, "message": message}]}


Duration = Annotated[
    str,
    AfterValidator(_check_duration),
    Field(
        max_length=32,
        json_schema_extra=_cel("self.matches('^[0-9]+(ms|s|m|h)$')", f"must be {DURATION_HINT}"),
    ),
]
"""A duration in the runtime CLI's format; kept as text so the same value is passed to `sluice run`."""

Uri = Annotated[
    str,
    AfterValidator(_check_uri),
    Field(
        max_length=1024,
        json_schema_extra=_cel("self.matches('^(/|[a-z][a-z0-9+.-]*://).+$')", f"must be {URI_HINT}"),
    ),
]
"""An fsspec URI of object storage (a plain absolute path means file://)."""

ObjectName = Annotated[
    str,
    AfterValidator(_check_name),
    Field(
        max_length=63,
        json_schema_extra=_cel("self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')", f"must be {NAME_HINT}"),
    ),
]

Quantity = Annotated[
    int | str,
    Field(json_schema_extra={"x-kubernetes-int-or-string": True}),
]
"""A Kubernetes resource quantity (`500m`, `2Gi`, `1`); the API server checks its syntax on the pod."""
