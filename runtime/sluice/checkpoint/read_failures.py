"""Whether a subtask's failure is storage failing under the restore of its state.

A TaskManager reads the state it restores (operator state, keyed state files) itself. When that read
fails because the store fails (an object store answering errors, a file system refusing reads), no
restart mends it until the store is repaired: the job suspends as it does when the coordinator cannot
read the checkpoint's `_metadata`, rather than failing and restarting for ever. Two other failures of a
restore stay ordinary task failures:
- a damaged or substituted file (`IntegrityError` from the checks of `sluice.state.stored_files`, or a
  state file that is missing): the checkpoint is bad, and the restart strategy and the coordinator's
  choice of checkpoint deal with it as before;
- an error of the code that restores (an operator's or a user function's): no storage read is on its
  call stack.
"""

from __future__ import annotations

from types import CodeType, TracebackType

from sluice.state.chain_files import read_frames
from sluice.state.stored_files import IntegrityError, open_verified, read_verified

# The functions every read of a stored state file goes through: a failure raised inside one of them is
# the store's (or the file's: IntegrityError).
_STATE_READS: frozenset[CodeType] = frozenset(
    {read_verified.__code__, read_frames.__code__, open_verified.__wrapped__.__code__}  # type: ignore[attr-defined]
)


def _codes(trace: TracebackType | None) -> set[CodeType]:
    codes = set()
    while trace is not None:
        codes.add(trace.tb_frame.f_code)
        trace = trace.tb_next
    return codes


def is_storage_read_failure(error: BaseException) -> bool:
    """`error` came from the store while a stored state file was read, and not from damage."""
    if isinstance(error, IntegrityError | FileNotFoundError | ValueError):
        return False
    return not _STATE_READS.isdisjoint(_codes(error.__traceback__))
