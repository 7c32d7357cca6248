"""What an attempt restores: the checkpoint it picks from storage, and that checkpoint's `_metadata`, read
and checked. A failure ends the attempt (`AttemptEnded`) saying whether a retry can mend it; a problem
with the user's own `--from-savepoint` is raised as it is, a usage error no retry changes."""

from __future__ import annotations

import asyncio

from sluice.checkpoint.integrity import IntegrityError
from sluice.checkpoint.metadata import CheckpointMetadata
from sluice.checkpoint.pending import CheckpointRecord
from sluice.checkpoint.state_key import StateKey
from sluice.checkpoint.storage import CheckpointStorage, read_metadata
from sluice.coordinator._attempt_events import AttemptEnded
from sluice.coordinator._restore_info import RestoreFailed
from sluice.coordinator.validation import RestoreRefused
from sluice_contract.checkpoints import NoRestorableCheckpoint


async def restore_point(
    storage: CheckpointStorage, known: CheckpointRecord | None, previous: str | None
) -> str | None:
    """The latest completed checkpoint in storage, else what the previous attempt restored. `known`:
    the latest checkpoint this run completed."""
    try:
        found = await asyncio.to_thread(storage.latest_completed)
    except NoRestorableCheckpoint as err:
        raise AttemptEnded(RestoreFailed(str(err), permanent=True)) from err
    except Exception as err:
        raise AttemptEnded(
            RestoreFailed(f"listing checkpoints in {storage.job_dir} failed: {type(err).__name__}: {err}")
        ) from err
    if found is None and known is not None:
        # Storage lists nothing, yet this run completed a checkpoint there (a directory moved away
        # for a while, a store that answers a listing from a stale or empty view). Starting from
        # the previous restore point, or from the beginning, would have the two-phase-commit sinks
        # commit output a second time: wait for storage instead, as for a listing that failed.
        raise AttemptEnded(
            RestoreFailed(
                f"listing checkpoints in {storage.job_dir} found none, though checkpoint "
                f"{known.checkpoint_id} of this run completed at {known.path}"
            )
        )
    return found or previous


async def read_restore_metadata(
    restore: str, key: StateKey, from_savepoint: str | None, trust_savepoint: bool
) -> CheckpointMetadata:
    """The `_metadata` an attempt restores, checked. `trust_savepoint` applies to `from_savepoint` only."""
    try:
        trust = trust_savepoint and restore == from_savepoint
        return await asyncio.to_thread(read_metadata, restore, key, trust=trust)
    except FileNotFoundError:
        if restore == from_savepoint:
            raise  # the user's savepoint is not there: a usage error, not a failure to retry
        raise AttemptEnded(RestoreFailed(f"checkpoint {restore} is gone")) from None
    except IntegrityError as err:
        if restore == from_savepoint:
            raise  # not authentic: the user decides (--trust-savepoint), no retry changes it
        raise AttemptEnded(RestoreFailed(str(err), permanent=True)) from None
    except ValueError as err:  # FormatError: a malformed _metadata, which no retry mends
        if restore == from_savepoint:
            raise RestoreRefused(f"--from-savepoint {restore}: {err}") from err
        raise AttemptEnded(RestoreFailed(f"reading {restore} failed: {err}", permanent=True)) from err
    except Exception as err:
        # Storage down or answering errors: the restart strategy decides, as for a lost task.
        raise AttemptEnded(RestoreFailed(f"reading {restore} failed: {type(err).__name__}: {err}")) from err
