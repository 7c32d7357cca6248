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

from typing import Any

from sluice.checkpoint.state_key import StateKey
from sluice.state.stored_files import IntegrityError
from sluice_contract import integrity as _contract
from sluice_contract.integrity import ALGORITHM, INTEGRITY_FIELD, Verdict, canonical

__all__ = ["ALGORITHM", "INTEGRITY_FIELD", "IntegrityError", "Verdict", "canonical", "seal", "verdict"]


def seal(document: dict[str, Any], key: StateKey) -> dict[str, Any]:
    """`document` with its MAC (`sluice_contract.integrity`, which the operator checks results with)."""
    return _contract.seal(document, key.secret)


def verdict(document: dict[str, Any], key: StateKey) -> Verdict:
    """Checks `document`'s MAC before any of its other fields is looked at."""
    return _contract.verdict(document, key.secret)
