"""Side outputs: records an operator emits beside its main output, and the dead letters among them.

An `OutputTag` names a side output. An operator emits to it (`KeyedContext.output`, a window's late
data, a dead letter of `on_error=tag`) and `DataStream.get_side_output(tag)` turns it into a stream of
its own. Side-output records travel on their own edges of the job graph, with the same watermarks and
checkpoint barriers as the main output, so a sink behind a side output is exactly once like any other.
Two tags with the same name are the same side output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_ERROR_CHARS = 2000
"""How much of an exception's text a dead letter keeps: enough to diagnose, never enough to hurt."""


@dataclass(frozen=True)
class OutputTag:
    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"OutputTag needs a non-empty name, got {self.name!r}")


@dataclass(frozen=True)
class FailedRecord:
    """A record whose user function raised, sent to the operator's `on_error` side output."""

    value: Any
    error: str
    """`"ExceptionType: message"`, cut to MAX_ERROR_CHARS."""
    operator_uid: str


def describe_error(error: BaseException) -> str:
    """`"ExceptionType: message"`, bounded; an exception whose `str` itself raises still gets a text."""
    try:
        message = str(error)
    except Exception:  # the user's __str__ is as likely to be broken as the function that raised
        message = "<the exception's message could not be read>"
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    if len(text) > MAX_ERROR_CHARS:
        cut = len(text) - MAX_ERROR_CHARS
        text = f"{text[:MAX_ERROR_CHARS]}... [{cut} more characters]"
    return text


def error_policy(on_error: object, where: str) -> str | OutputTag:
    """Checks an `on_error` argument: "fail", "skip" or an OutputTag."""
    if isinstance(on_error, OutputTag) or (isinstance(on_error, str) and on_error in ("fail", "skip")):
        return on_error
    raise ValueError(
        f'{where}: on_error must be "fail", "skip" or a sluice.OutputTag for dead letters, got {on_error!r}'
    )
