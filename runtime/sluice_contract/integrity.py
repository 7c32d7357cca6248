"""The MAC on stored documents (`_metadata`, `job-result.json`): one definition for the runtime and the
operator.

A document carries an `integrity` field: the algorithm, the id of the key that made it and an
HMAC-SHA-256 over the canonical JSON of every other field. The coordinator seals what it stores with the
deployment's state key; the operator, which holds the same key on Kubernetes (the namespace's Secret
`sluice-state-key`), checks a stored result with it before acting on it. Keys are passed in as bytes:
where they come from (a file, a Secret) is each side's business.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

ALGORITHM = "HMAC-SHA-256"
INTEGRITY_FIELD = "integrity"


class Verdict(enum.Enum):
    VALID = "valid"
    UNSIGNED = "unsigned"
    """No MAC: written before MACs existed, or stripped."""
    OTHER_KEY = "other-key"
    """Made with another key: another deployment's, or a forgery."""
    TAMPERED = "tampered"
    """This deployment's key id, and a MAC that does not match: edited since it was written."""

    def explain(self, key_id: str) -> str:
        return {
            Verdict.VALID: "is authenticated",
            Verdict.UNSIGNED: "carries no MAC (written before Sluice authenticated stored state, or "
            "stripped)",
            Verdict.OTHER_KEY: f"was authenticated with another key than this deployment's ({key_id})",
            Verdict.TAMPERED: "does not match its MAC: it was changed after it was written",
        }[self]


def key_id(secret: bytes) -> str:
    """A name for a key that gives nothing of it away: which key made a MAC, told apart in messages."""
    return hmac.new(secret, b"sluice state key id", hashlib.sha256).hexdigest()[:16]


def mac(secret: bytes, body: bytes) -> str:
    return hmac.new(secret, body, hashlib.sha256).hexdigest()


def canonical(document: Mapping[str, Any]) -> bytes:
    return json.dumps(
        document, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode()


def seal(document: Mapping[str, Any], secret: bytes) -> dict[str, Any]:
    """`document` with its MAC: over the canonical JSON of every other field."""
    body = {k: v for k, v in document.items() if k != INTEGRITY_FIELD}
    mark = {"algorithm": ALGORITHM, "keyId": key_id(secret), "mac": mac(secret, canonical(body))}
    return {**body, INTEGRITY_FIELD: mark}


def verdict(document: Mapping[str, Any], secret: bytes) -> Verdict:
    """Checks `document`'s MAC before any of its other fields is looked at."""
    mark = document.get(INTEGRITY_FIELD)
    if mark is None:
        return Verdict.UNSIGNED
    if (
        not isinstance(mark, Mapping)
        or mark.get("algorithm") != ALGORITHM
        or not isinstance(mark.get("mac"), str)
    ):
        return Verdict.TAMPERED
    body = {k: v for k, v in document.items() if k != INTEGRITY_FIELD}
    try:
        signed = canonical(body)
    except (ValueError, RecursionError):  # NaN or infinity: nothing Sluice writes
        return Verdict.TAMPERED
    if hmac.compare_digest(mac(secret, signed), mark["mac"]):
        return Verdict.VALID
    return Verdict.TAMPERED if mark.get("keyId") == key_id(secret) else Verdict.OTHER_KEY
