"""The `sluice` commands that talk to a running job's coordinator: status, cancel, savepoint, stop."""

from __future__ import annotations

import argparse
import hmac
import http.client
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any

from sluice._states import CheckpointStatus, JobState, StopMode
from sluice._status import summary
from sluice._tokens import (
    CHALLENGE_HEADER,
    ENV_VAR,
    endpoint,
    find_token,
    new_challenge,
    token_dir,
    token_proof,
)
from sluice_contract.rest import SavepointTrigger

POLL_S = 0.1
TRIGGER_ATTEMPTS = 3
"""How often a savepoint trigger is sent when no answer comes back: its request id makes a repeat safe."""


class ClientError(Exception):
    """The coordinator cannot be reached, or refused the request; the message says which and why."""


class Unreachable(ClientError):
    """No answer came back: the request may or may not have reached the coordinator."""


class Coordinator:
    """The REST API of a running job, called with the job's token when there is one."""

    def __init__(self, address: str, token: str | None) -> None:
        self.address = address.rstrip("/")
        self._token = token

    @classmethod
    def of(cls, args: argparse.Namespace) -> Coordinator:
        token = args.token or os.environ.get(ENV_VAR, "").strip() or None
        coordinator = cls(args.address, token)
        if token is None:
            coordinator._token = coordinator._stored_token()
        return coordinator

    def _stored_token(self) -> str | None:
        """The token this user stored for the job at the address, if that server proves it holds it.

        The health route is open in every auth mode; its job id names the token file of the user who
        started the job (sluice._tokens), so that user needs no --token. Whoever answers names the job,
        though: the token goes only to a server that answered the challenge with it (`token_proof`).
        """
        nonce = new_challenge()
        try:
            health, server_endpoint = self._health(nonce)
            job_id = str(health["jobId"])
        except (ClientError, KeyError, TypeError):
            return None
        stored = find_token(job_id)
        if stored is None:
            return None
        proof = health.get("tokenProof")
        expected = token_proof(stored, bytes.fromhex(nonce), server_endpoint)
        if isinstance(proof, str) and hmac.compare_digest(proof.encode(), expected.encode()):
            return stored
        print(
            f"sluice: the server at {self.address} says it runs job {job_id!r} but did not prove it holds "
            f"that job's stored token, so the token is not sent to it; pass --token if you trust it",
            file=sys.stderr,
        )
        return None

    def _health(self, nonce: str) -> tuple[Any, str]:
        """GET /v1/health with a token challenge: the answer, and the address this end reached."""
        url = urllib.parse.urlsplit(self.address)
        kind = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        try:
            connection = kind(url.hostname or "", url.port, timeout=30)
            try:
                connection.connect()
                assert connection.sock is not None
                reached = endpoint(connection.sock.getpeername())
                connection.request(
                    "GET", url.path.rstrip("/") + "/v1/health", headers={CHALLENGE_HEADER: nonce}
                )
                response = connection.getresponse()
                if response.status != 200:
                    raise ClientError(f"GET /v1/health: {response.status} {response.reason}")
                return json.loads(response.read()), reached
            finally:
                connection.close()
        except (OSError, ValueError, http.client.HTTPException) as err:
            raise ClientError(f"cannot reach the coordinator at {self.address}: {err}") from err

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        headers = {"Content-Type": "application/json"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.address + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as err:
            try:
                message = json.loads(err.read()).get("error", err.reason)
            except (ValueError, AttributeError):
                message = err.reason
            if err.code in (401, 403):
                message += (
                    f"; pass --token or set {ENV_VAR}, or run this as the user who started the job "
                    f"(its token is kept in {token_dir()})"
                )
            raise ClientError(f"{method} {path}: {err.code} {message}") from err
        except (urllib.error.URLError, ConnectionError, TimeoutError) as err:
            raise Unreachable(f"cannot reach the coordinator at {self.address}: {err}") from err


def client_command(args: argparse.Namespace) -> int:
    """Runs `status`, `cancel`, `savepoint` or `stop`; the exit code. Raises ClientError."""
    coordinator = Coordinator.of(args)
    if args.command == "status":
        job = coordinator.request("GET", "/v1/job")
        print(json.dumps(job, indent=2) if args.output == "json" else summary(job))
        return 0
    if args.command == "cancel":
        coordinator.request("POST", "/v1/job/cancel")
        return 0
    return _savepoint(coordinator, args)


def _savepoint(coordinator: Coordinator, args: argparse.Namespace) -> int:
    """`savepoint` and `stop`: trigger it, follow it to its end and print its path."""
    wanted = SavepointTrigger(
        stop=StopMode.of_drain(args.drain) if args.command == "stop" else None,
        target_directory=args.savepoint_dir or None,
        request_id=f"cli-{uuid.uuid4().hex}",
    )
    trigger = _trigger(coordinator, wanted)
    entry = _savepoint_outcome(coordinator, trigger)
    if entry["status"] != CheckpointStatus.COMPLETED:
        print(f"sluice {args.command}: savepoint failed: {entry['error']}", file=sys.stderr)
        return 1
    if args.command == "stop" and not _job_finished(coordinator):
        return 1
    print(entry["path"])
    return 0


def _trigger(coordinator: Coordinator, wanted: SavepointTrigger) -> str:
    """POST /v1/savepoints; its trigger id. A connection that breaks before the answer may have started
    the savepoint (or the stop) all the same, so the same request is sent again: the coordinator answers
    a request id it has seen with that request's trigger and starts nothing new."""
    attempt = 1
    while True:
        try:
            return str(coordinator.request("POST", "/v1/savepoints", wanted.to_json())["triggerId"])
        except Unreachable:
            if attempt == TRIGGER_ATTEMPTS:
                raise
            time.sleep(0.5 * attempt)
            attempt += 1


def _savepoint_outcome(coordinator: Coordinator, trigger: str) -> Any:
    """GET /v1/savepoints/{trigger} once the savepoint is no longer in progress."""
    while True:
        entry = coordinator.request("GET", f"/v1/savepoints/{trigger}")
        if entry["status"] != CheckpointStatus.IN_PROGRESS:
            return entry
        time.sleep(POLL_S)


def _job_finished(coordinator: Coordinator) -> bool:
    """After a stop: waits until the job ended; whether it ended FINISHED (else says how it ended)."""
    while True:
        try:
            state = coordinator.request("GET", "/v1/job")["state"]
        except ClientError:
            return True  # the coordinator has exited: the job ended
        if state in (JobState.FINISHED, JobState.FAILED, JobState.CANCELED):
            if state != JobState.FINISHED:
                print(f"sluice stop: the job ended {state}", file=sys.stderr)
                return False
            return True
        time.sleep(POLL_S)
