"""Control messages: JSON objects with a `type`, checked against a schema when they arrive.

Control messages travel between the coordinator and TaskManagers on the control connection. They are
JSON, a format whose decoding runs no code, and every message is checked here before anyone reads a
field: an unknown type, a missing field or a field of the wrong type ends the connection with a message
saying what was wrong, instead of a KeyError deep inside the job master. The one field that carries
Python objects, the deployed job graph, is an opaque base64 string that a TaskManager unpickles only
from a coordinator that proved it holds the job's secret.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping
from typing import Any

_INT = (int,)
_STR = (str,)
_BOOL = (bool,)
_LIST = (list,)
_DICT = (dict,)
_OPTIONAL_STR = (str, type(None))

# type -> required field -> accepted JSON types. Fields not named here are allowed and ignored by the
# schema (a newer peer may send more), but a receiver reads only the fields it names.
TO_TASKMANAGER: dict[str, dict[str, tuple[type, ...]]] = {
    "deploy": {
        "attempt": _INT,
        "jobId": _STR,
        "graph": _STR,
        "tasks": _LIST,
        "placement": _DICT,
        "taskmanagers": _DICT,
        "restore": _OPTIONAL_STR,
        "attemptToken": _STR,
        "waitForFinalCheckpoint": _BOOL,
    },
    "trigger": {"checkpoint": _INT, "timestamp": _INT, "location": _STR, "savepoint": _BOOL, "tasks": _LIST},
    "complete": {"checkpoint": _INT},
    "abort": {"checkpoint": _INT},
    "stop": {"drain": _BOOL},
    "shutdown": {},
}
TO_COORDINATOR: dict[str, dict[str, tuple[type, ...]]] = {
    "register": {"tm": _INT, "host": _STR, "dataPort": _INT, "pid": _INT},
    "task": {"vertex": _INT, "subtask": _INT, "state": _STR},
    "ack": {"checkpoint": _INT, "vertex": _INT, "subtask": _INT, "operators": _LIST, "endOfData": _BOOL},
    "decline": {"checkpoint": _INT, "vertex": _INT, "subtask": _INT, "reason": _STR},
    "metrics": {"tm": _INT, "metrics": _DICT},
    # Sent by a TaskManager's heartbeat thread on a connection of its own (see engine/_pulse.py).
    "heartbeat": {"tm": _INT, "pid": _INT, "dataPort": _INT},
}


def _check_metrics(message: Mapping[str, Any]) -> None:
    """A heartbeat's samples: `"<vertex>:<subtask>"` -> {figure name: number or null}."""
    for key, sample in message["metrics"].items():
        vertex, sep, subtask = key.partition(":")
        if not (sep and vertex.isdecimal() and subtask.isdecimal() and isinstance(sample, dict)):
            raise MessageError(f"metrics must map 'vertex:subtask' to an object, not {key!r}: {sample!r}")
        for name, value in sample.items():
            number = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
            if not (value is None or (number and not isinstance(value, bool))):
                raise MessageError(f"metric {name!r} of subtask {key} is {value!r}, not a number")


# Checks of nested fields, after the top-level schema passed.
_DEEP_CHECKS = {"metrics": _check_metrics}


class MessageError(ValueError):
    """A control message that is not JSON or does not match its schema."""


def encode_message(message: Mapping[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":"), allow_nan=False).encode()


def decode_message(payload: bytes, schema: Mapping[str, Mapping[str, tuple[type, ...]]]) -> dict[str, Any]:
    try:
        message = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as err:
        raise MessageError(f"a control message is not JSON: {err}") from None
    if not isinstance(message, dict):
        raise MessageError(f"a control message must be a JSON object, not {type(message).__name__}")
    kind = message.get("type")
    fields = schema.get(kind) if isinstance(kind, str) else None
    if fields is None:
        raise MessageError(f"unknown control message type {kind!r}; expected one of {sorted(schema)}")
    for name, accepted in fields.items():
        if name not in message:
            raise MessageError(f"control message {kind!r} lacks the field {name!r}")
        value = message[name]
        # bool is an int in Python, but never a valid int field here.
        if not isinstance(value, accepted) or (isinstance(value, bool) and bool not in accepted):
            raise MessageError(
                f"field {name!r} of control message {kind!r} is {type(value).__name__}, "
                f"not {' or '.join(t.__name__ for t in accepted)}"
            )
    deep = _DEEP_CHECKS.get(str(kind)) if schema is TO_COORDINATOR else None
    if deep is not None:
        deep(message)
    return message


def encode_blob(data: bytes) -> str:
    """Bytes inside a JSON message (the pickled job graph)."""
    return base64.b64encode(data).decode("ascii")


def decode_blob(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)
