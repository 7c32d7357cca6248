"""Launch settings for executors on other machines, sealed under Spark's own secret file.

On Kubernetes the executors are pods: no file of the driver's reaches them, but the Spark
authentication secret does, mounted by the operator into every pod of the job
(`spark.authenticate.secret.driver.file` and `.executor.file`). The closure then carries the launch
settings encrypted and authenticated (AES-256-GCM) under a key derived from that secret (HKDF-SHA256),
with the path where the executor finds the secret. Whoever reads the broadcast block (Spark's RPC is
authenticated too) learns neither the job secret nor the TLS key without the Spark secret itself.
"""

from __future__ import annotations

import os
from typing import Any

from sluice.transport.secret import LaunchSettingsError, TaskManagerLaunch

_NONCE_BYTES = 12
_CONTEXT = b"sluice TaskManager launch settings v1"


def secret_files(conf: Any) -> tuple[str, str] | None:
    """The Spark secret file as the driver and as executors read it, if Spark is configured with one."""
    common = conf.get("spark.authenticate.secret.file", None)
    driver = conf.get("spark.authenticate.secret.driver.file", None) or common
    executor = conf.get("spark.authenticate.secret.executor.file", None) or common
    return (driver, executor) if driver and executor else None


def can_seal() -> bool:
    try:
        import cryptography  # noqa: F401
    except ImportError:
        return False
    return True


def seal(launch: TaskManagerLaunch, secret_file: str) -> bytes:
    """`launch` encrypted and authenticated under the key derived from `secret_file`: nonce | AEAD."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(_NONCE_BYTES)
    return nonce + AESGCM(_key(secret_file)).encrypt(nonce, launch.encode().encode(), _CONTEXT)


def unseal(sealed: bytes, secret_file: str) -> TaskManagerLaunch:
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce, body = sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:]
    try:
        text = AESGCM(_key(secret_file)).decrypt(nonce, body, _CONTEXT)
    except InvalidTag:
        raise LaunchSettingsError(
            f"the sealed launch settings do not open with the Spark secret in {secret_file}: they were "
            "changed on the way, or the driver and this executor were given different Spark secrets"
        ) from None
    return TaskManagerLaunch.decode(text.decode())


def _key(secret_file: str) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    try:
        with open(secret_file, "rb") as handle:
            secret = handle.read().strip()
    except OSError as err:
        raise LaunchSettingsError(
            f"cannot read the Spark secret file {secret_file}: {err.strerror or err}"
        ) from None
    if not secret:
        raise LaunchSettingsError(f"the Spark secret file {secret_file} is empty")
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_CONTEXT).derive(secret)
