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
class TlsMaterial:
    """The job's own certificate authority: its certificate and the key every endpoint serves with."""

    certificate_pem: str
    key_pem: str = field(repr=False)


@dataclass(frozen=True)
class TaskManagerLaunch:
    """What a TaskManager needs to join its job: where the coordinator is and how to authenticate."""

    coordinator: str
    """HOST:PORT of the coordinator's control port."""
    secret: JobSecret = field(repr=False)
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    tls: TlsMaterial | None = field(default=None, repr=False)

    def to_json(self) -> str:
        body: dict[str, Any] = {
            "coordinator": self.coordinator,
            "secret": self.secret.key.hex(),
            "maxFrameBytes": self.max_frame_bytes,
            "tls": None
            if self.tls is None
            else {"certificate": self.tls.certificate_pem, "key": self.tls.key_pem},
        }
        return json.dumps(body)

    @classmethod
    def from_json(cls, text: str) -> TaskManagerLaunch:
        try:
            body = json.loads(text)
        except ValueError as err:
            raise LaunchSettingsError(f"launch settings are not JSON: {err}") from None
        if not isinstance(body, dict):
            raise LaunchSettingsError("launch settings must be a JSON object")
        coordinator, secret, limit, tls = (
            body.get("coordinator"),
            body.get("secret"),
            body.get("maxFrameBytes"),
            body.get("tls"),
        )
        if not isinstance(coordinator, str) or ":" not in coordinator:
            raise LaunchSettingsError("launch settings need 'coordinator' as HOST:PORT")
        if not isinstance(secret, str):
            raise LaunchSettingsError("launch settings need the job 'secret' (hex)")
        try:
            key = bytes.fromhex(secret)
        except ValueError:
            raise LaunchSettingsError("the job 'secret' in the launch settings is not hex") from None
        if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
            raise LaunchSettingsError("launch settings need 'maxFrameBytes' as a positive integer")
        material = None
        if tls is not None:
            if not (
                isinstance(tls, dict)
                and isinstance(tls.get("certificate"), str)
                and isinstance(tls.get("key"), str)
            ):
                raise LaunchSettingsError("'tls' in the launch settings needs 'certificate' and 'key' (PEM)")
            material = TlsMaterial(tls["certificate"], tls["key"])
        return cls(coordinator, JobSecret(key), limit, material)
