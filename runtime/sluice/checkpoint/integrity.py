"""Integrity of stored state: what keeps a planted or edited checkpoint file from being unpickled.

Every state file a checkpoint or savepoint names has its SHA-256 digest recorded in `_metadata`
(computed while the file is written, never by reading it again), and `_metadata` carries an
HMAC-SHA-256 over its canonical JSON, made with the deployment's state key (`state_key`). The MAC
authenticates every field, the digests included, so a state file is authenticated through the
`_metadata` that names it: HMAC(key, metadata ∋ SHA-256(file)). Only the coordinator holds the key.
It checks the MAC of what it restores, then tells the TaskManagers the SHA-256 of the exact `_metadata`
bytes it accepted; they read nothing else, and check every state file against its digest before a byte
of it is unpickled.

How a state file is checked against its digest: `sluice.state.stored_files`.
"""

from __future__ import annotations

import enum
import json
from typing import Any

from sluice.checkpoint.state_key import StateKey
from sluice.state.stored_files import IntegrityError

ALGORITHM = "HMAC-SHA-256"
INTEGRITY_FIELD = "integrity"
__all__ = ["ALGORITHM", "INTEGRITY_FIELD", "IntegrityError", "Verdict", "canonical", "seal", "verdict"]


class Verdict(enum.Enum):
    VALID = "valid"
    UNSIGNED = "unsigned"
    """No MAC: written before MACs existed, or stripped."""
    OTHER_KEY = "other-key"
    """Made with another key: another deployment's, or a forgery."""
    TAMPERED = "tampered"
    """This deployment's key id, and a MAC that does not match: edited since it was written."""

    def explain(self, key: StateKey) -> str:
        return {
            Verdict.VALID: "is authenticated",
            Verdict.UNSIGNED: "carries no MAC (written before Sluice authenticated stored state, or "
            "stripped)",
            Verdict.OTHER_KEY: f"was authenticated with another key than this deployment's ({key.key_id})",
            Verdict.TAMPERED: "does not match its MAC: it was changed after it was written",
        }[self]


def canonical(document: dict[str, Any]) -> bytes:
    return json.dumps(
        document, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode()


def seal(document: dict[str, Any], key: StateKey) -> dict[str, Any]:
    """`document` with its MAC: over the canonical JSON of every other field."""
    body = {k: v for k, v in document.items() if k != INTEGRITY_FIELD}
    mark = {"algorithm": ALGORITHM, "keyId": key.key_id, "mac": key.mac(canonical(body))}
    return {**body, INTEGRITY_FIELD: mark}


def verdict(document: dict[str, Any], key: StateKey) -> Verdict:
    """Checks `document`'s MAC before any of its other fields is looked at."""
    mark = document.get(INTEGRITY_FIELD)
    if mark is None:
        return Verdict.UNSIGNED
    if (
        not isinstance(mark, dict)
        or mark.get("algorithm") != ALGORITHM
        or not isinstance(mark.get("mac"), str)
    ):
        return Verdict.TAMPERED
    body = {k: v for k, v in document.items() if k != INTEGRITY_FIELD}
    try:
        signed = canonical(body)
    except (ValueError, RecursionError):  # NaN or infinity: nothing Sluice writes
        return Verdict.TAMPERED
    if key.verifies(signed, mark["mac"]):
        return Verdict.VALID
    return Verdict.TAMPERED if mark.get("keyId") == key.key_id else Verdict.OTHER_KEY
