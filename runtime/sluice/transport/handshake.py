"""Mutual challenge-response: both ends prove they hold the job's secret before a frame is read.

The order on every new connection (control or data), all messages of fixed size:

1. The accepting side sends `MAGIC` and a fresh 32-byte nonce.
2. The connecting side answers with its own nonce and `HMAC(secret, client | purpose | both nonces)`.
3. The accepting side checks that proof in constant time. On failure it sends `REFUSED` and closes the
   connection: nothing the peer sent is decoded, and a length header it may have sent is never read.
   Otherwise it answers with `HMAC(secret, server | purpose | both nonces)`.
4. The connecting side checks that proof, so a TaskManager never sends records or acknowledgements to
   a listener that merely took over a port.

Fresh nonces from both sides make a recorded exchange useless on a new connection; the role and
purpose in each MAC keep one side's proof from being reflected as the other's, or a data channel's as
a control connection's.

A connection that ends before the exchange is done (the listener dropped it to make room during a
flood, see `sluice.transport._admission`, or it timed out) raises `HandshakeCut`, which the connecting
side retries; an explicit `REFUSED` or a wrong proof raises plain `AuthenticationFailed`, which it does
not. The handshake does not protect what follows against a party that can rewrite
packets in flight: that is what `--internal-tls` is for.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets

from sluice._waiting import within
from sluice.transport.secret import JobSecret

MAGIC = b"SLUICE\x00\x01"
NONCE_BYTES = 32
MAC_BYTES = hashlib.sha256().digest_size
REFUSED = b"SLUICE-HANDSHAKE-REFUSED".ljust(MAC_BYTES, b"\x00")
"""What the accepting side sends instead of its proof when the peer's proof is wrong."""
HANDSHAKE_TIMEOUT_S = 3.0
"""How long a peer has to complete the handshake (TLS included); a silent connection is dropped after
it. Real peers take milliseconds; the job's own ones retry if a loaded machine makes them miss it."""

CONTROL = b"control"
DATA = b"data"


class AuthenticationFailed(ConnectionError):
    """The peer did not prove it holds the job's secret (or is not a Sluice endpoint at all)."""


class HandshakeCut(AuthenticationFailed):
    """The connection ended or stalled before the handshake was done: worth another try."""


def _proof(secret: JobSecret, role: bytes, purpose: bytes, server_nonce: bytes, client_nonce: bytes) -> bytes:
    message = b"sluice-handshake-v1|" + role + b"|" + purpose + b"|" + server_nonce + client_nonce
    return hmac.new(secret.key, message, hashlib.sha256).digest()


async def accept(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    secret: JobSecret,
    purpose: bytes,
    timeout_s: float = HANDSHAKE_TIMEOUT_S,
) -> None:
    """The accepting side's half; raises `AuthenticationFailed` (and the caller closes) on any failure."""
    server_nonce = secrets.token_bytes(NONCE_BYTES)
    writer.write(MAGIC + server_nonce)
    try:
        await within(writer.drain(), timeout_s)
        answer = await within(reader.readexactly(NONCE_BYTES + MAC_BYTES), timeout_s)
    except TimeoutError:
        raise HandshakeCut(f"no handshake within {timeout_s:g}s") from None
    except asyncio.IncompleteReadError:
        raise HandshakeCut("the peer closed the connection during the handshake") from None
    client_nonce, proof = answer[:NONCE_BYTES], answer[NONCE_BYTES:]
    expected = _proof(secret, b"client", purpose, server_nonce, client_nonce)
    if not hmac.compare_digest(proof, expected):
        writer.write(REFUSED)
        raise AuthenticationFailed("the peer's proof does not match the job's secret")
    writer.write(_proof(secret, b"server", purpose, server_nonce, client_nonce))
    await writer.drain()


async def connect(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    secret: JobSecret,
    purpose: bytes,
    timeout_s: float = HANDSHAKE_TIMEOUT_S,
) -> None:
    """The connecting side's half; raises `AuthenticationFailed` if the listener is not the job's."""
    try:
        hello = await within(reader.readexactly(len(MAGIC) + NONCE_BYTES), timeout_s)
    except TimeoutError:
        raise HandshakeCut(f"the listener sent no handshake within {timeout_s:g}s") from None
    except asyncio.IncompleteReadError:
        raise HandshakeCut("the listener closed the connection during the handshake") from None
    if hello[: len(MAGIC)] != MAGIC:
        raise AuthenticationFailed("the listener is not a Sluice endpoint of this version")
    server_nonce = hello[len(MAGIC) :]
    client_nonce = secrets.token_bytes(NONCE_BYTES)
    writer.write(client_nonce + _proof(secret, b"client", purpose, server_nonce, client_nonce))
    try:
        await within(writer.drain(), timeout_s)
        proof = await within(reader.readexactly(MAC_BYTES), timeout_s)
    except TimeoutError:
        raise HandshakeCut(f"the listener did not answer the handshake within {timeout_s:g}s") from None
    except asyncio.IncompleteReadError:
        raise HandshakeCut("the listener closed the connection before answering this end's proof") from None
    if proof == REFUSED:
        raise AuthenticationFailed("the listener refused this end's proof of the job's secret")
    if not hmac.compare_digest(proof, _proof(secret, b"server", purpose, server_nonce, client_nonce)):
        raise AuthenticationFailed("the listener's proof does not match the job's secret")
