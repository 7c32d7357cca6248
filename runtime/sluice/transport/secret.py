"""The per-job secret and the launch settings that carry it to TaskManagers.

The coordinator makes one secret per job (256 random bits). TaskManagers get it only through the
host's own launch path: a process host writes the settings to the TaskManager's standard input; the
Spark host writes them to a private file on `local[N]` and puts its path into the barrier task's
closure, and on Kubernetes seals them into the closure under the job's mounted Spark secret
(`hosts/spark/_launch_file.py`, `_sealed_launch.py`): a closure is a broadcast block, not a secret. It
never appears in a command line, a log line, a REST answer or a repr.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from sluice_contract.codec import Document, DocumentError, decode_object, wire

SECRET_BYTES = 32
DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
"""The largest frame a peer may announce. Record batches and the deployed job graph must fit."""


class LaunchSettingsError(ValueError):
    """Launch settings that are missing or malformed; the message says which field."""


@dataclass(frozen=True)
class JobSecret:
    """A shared key both ends of every internal connection must prove they hold."""

    key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.key) < SECRET_BYTES:
            raise LaunchSettingsError(f"a job secret has at least {SECRET_BYTES} bytes, not {len(self.key)}")

    @classmethod
    def generate(cls) -> JobSecret:
        return cls(secrets.token_bytes(SECRET_BYTES))

    def __str__(self) -> str:
        return "JobSecret(<hidden>)"


@dataclass(frozen=True)
class TlsMaterial(Document):
    """The job's own certificate authority: its certificate and the key every endpoint serves with."""

    certificate_pem: str = field(metadata=wire(name="certificate"))
    key_pem: str = field(repr=False, metadata=wire(name="key"))


# The readers of the secret and the TLS key never show what they were given: a malformed secret may
# still be most of the real one.


def _coordinator(value: Any, where: str, name: str) -> str:
    if not isinstance(value, str) or ":" not in value:
        raise LaunchSettingsError("launch settings need 'coordinator' as HOST:PORT")
    return value


def _secret(value: Any, where: str, name: str) -> JobSecret:
    if not isinstance(value, str):
        raise LaunchSettingsError("launch settings need the job 'secret' (hex)")
    try:
        key = bytes.fromhex(value)
    except ValueError:
        raise LaunchSettingsError("the job 'secret' in the launch settings is not hex") from None
    return JobSecret(key)


def _tls(value: Any, where: str, name: str) -> TlsMaterial:
    try:
        return TlsMaterial.from_json(value, where)
    except DocumentError:
        raise LaunchSettingsError(
            "'tls' in the launch settings needs 'certificate' and 'key' (PEM)"
        ) from None


_WHERE = "launch settings"


@dataclass(frozen=True)
class TaskManagerLaunch(Document):
    """What a TaskManager needs to join its job: where the coordinator is and how to authenticate."""

    coordinator: str = field(metadata=wire(read=_coordinator))
    """HOST:PORT of the coordinator's control port."""
    secret: JobSecret = field(repr=False, metadata=wire(read=_secret, write=lambda s: s.key.hex()))
    max_frame_bytes: int = field(default=DEFAULT_MAX_FRAME_BYTES, metadata=wire(minimum=1, required=True))
    tls: TlsMaterial | None = field(default=None, repr=False, metadata=wire(read=_tls))

    def encode(self) -> str:
        """The settings as the host hands them to a TaskManager (one line of JSON)."""
        return json.dumps(self.to_json())

    @classmethod
    def decode(cls, text: str) -> TaskManagerLaunch:
        """Reads what `encode` wrote; LaunchSettingsError says which field is missing or malformed."""
        try:
            return cls.from_json(decode_object(text, _WHERE), _WHERE)
        except DocumentError as err:
            raise LaunchSettingsError(str(err)) from None
