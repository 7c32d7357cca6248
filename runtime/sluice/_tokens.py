"""The bearer token of a job's REST API, and where the job's own user finds it without typing it.

`sluice run` without `--rest-token-file` or `SLUICE_REST_TOKEN` makes a token and stores it in the
user's state directory (XDG: `$XDG_STATE_HOME/sluice/rest-tokens/<job-id>`, by default under
`~/.local/state`); `sluice stop|savepoint|cancel|status` read it from there by the job id the coordinator
reports. The directories are 0700 and the file 0600, so only that user (and root) can read it. The
coordinator removes its file when it exits: the token is worth nothing once the REST API is gone.

The job id comes from whatever answers at `--address`, so a stored token is sent only to a server that
proved it knows it (`token_proof`): the CLI sends a fresh nonce in `CHALLENGE_HEADER` with its GET
/v1/health, and the coordinator answers `HMAC(token, nonce | the address the connection reached)`. The
address in the proof is the server's side of that very connection, so a fake server cannot pass on the
challenge to the real coordinator and forward its answer: the real one would prove its own address, not
the fake's. The token itself never goes to a server that has not proved it.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import os
import re
import secrets
from pathlib import Path

from sluice._private_dirs import private_directory

ENV_VAR = "SLUICE_REST_TOKEN"
CHALLENGE_HEADER = "X-Sluice-Token-Challenge"
"""A hex nonce of `CHALLENGE_BYTES` bytes, sent with GET /v1/health; the answer carries `tokenProof`."""
CHALLENGE_BYTES = 32

# A job id is chosen by whoever starts the job (`--job-id`) and, on the client side, reported by a
# server: as a file name it must not be able to leave the token directory.
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")


def new_token() -> str:
    return secrets.token_urlsafe(32)


def token_dir() -> Path:
    state = os.environ.get("XDG_STATE_HOME", "")
    # The XDG spec says a relative value is invalid and must be ignored.
    base = Path(state) if os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "sluice" / "rest-tokens"


def token_path(job_id: str) -> Path:
    name = job_id if _SAFE_NAME.fullmatch(job_id) else "sha256-" + hashlib.sha256(job_id.encode()).hexdigest()
    return token_dir() / name


def store_token(job_id: str, token: str) -> Path:
    """Writes `token` as the job's token file (0600, in 0700 directories); returns its path."""
    path = token_path(job_id)
    # 0700 and this user's, links not followed; one that is not is refused (PrivateDirectoryError).
    private_directory(path.parent.parent.parent, path.parent.parent.name, path.parent.name)
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, token.encode() + b"\n")
    finally:
        os.close(fd)
    # Renamed into place so that a client never reads half a token.
    os.replace(scratch, path)
    return path


def find_token(job_id: str) -> str | None:
    """The stored token of the job, if this user has one."""
    try:
        token = token_path(job_id).read_text().strip()
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return None
    return token or None


def remove_token(job_id: str, token: str) -> None:
    """Removes the job's token file if it still holds `token` (not a newer coordinator's)."""
    if find_token(job_id) == token:
        with contextlib.suppress(FileNotFoundError):
            token_path(job_id).unlink()


def read_token_file(path: str) -> str:
    """The token in a file such as a mounted Kubernetes Secret; raises ValueError when there is none."""
    try:
        token = Path(path).read_text().strip()
    except OSError as err:
        raise ValueError(f"cannot read the REST token file {path}: {err.strerror or err}") from err
    return checked_token(token, f"the REST token file {path}")


def checked_token(token: str, source: str) -> str:
    """`token` if it can travel in an HTTP header as a bearer token; else ValueError naming `source`."""
    if not token:
        raise ValueError(f"{source} is empty")
    if not _HEADER_SAFE.fullmatch(token):
        raise ValueError(f"{source} holds characters a bearer token cannot have (visible ASCII only)")
    return token


def new_challenge() -> str:
    return secrets.token_hex(CHALLENGE_BYTES)


def parse_challenge(value: str) -> bytes | None:
    """The nonce in a `CHALLENGE_HEADER` value, or None when it is not one."""
    if len(value) != 2 * CHALLENGE_BYTES:
        return None
    try:
        return bytes.fromhex(value)
    except ValueError:
        return None


def endpoint(address: object) -> str:
    """`ip:port` of a socket address, with an IPv4-mapped IPv6 address written as IPv4 (a dual-stack
    listener sees 127.0.0.1 as ::ffff:127.0.0.1)."""
    if not (isinstance(address, tuple) and len(address) >= 2):
        return ""
    ip = ipaddress.ip_address(str(address[0]).split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return f"{ip}:{int(address[1])}"


def token_proof(token: str, nonce: bytes, server_endpoint: str) -> str:
    """What a coordinator that holds `token` answers to `nonce` on a connection to `server_endpoint`."""
    message = b"sluice-rest-token-proof-v1|" + nonce + b"|" + server_endpoint.encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()
