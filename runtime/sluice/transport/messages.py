"""Control messages: JSON objects with a `type`, one frozen dataclass per type, checked when they arrive.

Control messages travel between the coordinator and TaskManagers on the control connection. They are
JSON, a format whose decoding runs no code, and every message is parsed into its type before anyone
reads a field: an unknown type, a missing field or a field of the wrong type ends the connection with a
message saying what was wrong, instead of a KeyError deep inside the job master. The messages are the
contract's (`sluice_contract.messages`, on its declarative codec); this module frames and dispatches
them. The one field that carries Python objects, the deployed job graph, is an opaque base64 string
that a TaskManager unpickles only from a coordinator that proved it holds the job's secret.

The acknowledgement of a checkpoint (`ack`) is the checkpoint package's
(`sluice.checkpoint.acknowledgement`): this module knows frames and fields, not state handles, so the
coordinator adds its parser to `TASKMANAGER_REPORTS`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from sluice_contract.codec import Document, DocumentError
from sluice_contract.messages import (
    STATE_WRITE,
    TASKMANAGER_REPORT_TYPES,
    TO_TASKMANAGER_TYPES,
    Abort,
    Complete,
    Decline,
    Deploy,
    Figures,
    Heartbeat,
    JobEnd,
    Message,
    MetricsReport,
    Register,
    Shutdown,
    Stop,
    SubtaskKey,
    TaskManagerReport,
    TaskReport,
    ToTaskManager,
    Trigger,
)

__all__ = [
    "STATE_WRITE",
    "TASKMANAGER_REPORTS",
    "TO_TASKMANAGER",
    "Abort",
    "Complete",
    "Decline",
    "Deploy",
    "Figures",
    "Heartbeat",
    "JobEnd",
    "Message",
    "MessageError",
    "MetricsReport",
    "Parser",
    "Register",
    "Shutdown",
    "Stop",
    "SubtaskKey",
    "TaskReport",
    "ToTaskManager",
    "Trigger",
    "decode_blob",
    "decode_message",
    "encode_blob",
    "encode_message",
]

M = TypeVar("M")
Parser = Callable[[Any, str], M]
"""Reads a decoded message, named in errors by the second argument: a `Document.from_json`."""


class MessageError(ValueError):
    """A control message that is not JSON or does not match its type."""


TO_TASKMANAGER: Mapping[str, Parser[ToTaskManager]] = {c.TYPE: c.from_json for c in TO_TASKMANAGER_TYPES}
# The reports whose fields this module knows; the coordinator adds the checkpoint acknowledgement.
TASKMANAGER_REPORTS: Mapping[str, Parser[TaskManagerReport]] = {
    c.TYPE: c.from_json for c in TASKMANAGER_REPORT_TYPES
}


def encode_message(message: Document) -> bytes:
    return json.dumps(message.to_json(), separators=(",", ":"), allow_nan=False).encode()


def decode_message(payload: bytes, kinds: Mapping[str, Parser[M]]) -> M:
    """Parses a payload into the message of its type, one of `kinds`; MessageError says what is wrong."""
    try:
        value = json.loads(payload)
    except (ValueError, RecursionError) as err:  # UnicodeDecodeError is a ValueError
        raise MessageError(f"a control message is not JSON: {err}") from None
    if not isinstance(value, dict):
        raise MessageError(f"a control message must be a JSON object, not {type(value).__name__}")
    kind = value.get("type")
    parse = kinds.get(kind) if isinstance(kind, str) else None
    if parse is None:
        raise MessageError(f"unknown control message type {kind!r}; expected one of {sorted(kinds)}")
    try:
        return parse(value, f"control message {kind!r}")
    except DocumentError as err:
        raise MessageError(str(err)) from None


def encode_blob(data: bytes) -> str:
    """Bytes inside a JSON message (the pickled job graph)."""
    return base64.b64encode(data).decode("ascii")


def decode_blob(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)
