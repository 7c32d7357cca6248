"""A record or a state value that cannot be pickled, found where it crosses a boundary.

Records travel between TaskManagers pickled, and operator state is pickled into checkpoints and
savepoints. A record that holds a lock, a socket or an open file cannot be, and the pickler's own error
("cannot pickle '_thread.lock' object", deep inside the transport or a snapshot) says neither which
operator made the record nor what to do. These errors say both. They are raised from the `except` of
the pickling call that already runs: nothing is checked per record while pickling succeeds.
"""

from __future__ import annotations

import pickle
from typing import Any

import cloudpickle

PICKLING_ERRORS = (pickle.PicklingError, TypeError, AttributeError)
"""What `pickle.dumps` raises for a value it cannot pickle."""

_REMEDY = (
    "records that cross to another TaskManager, and values kept in state or in a savepoint, must be "
    "picklable: turn it into plain data (tuples, dicts, dataclasses) before it leaves the operator, and "
    "keep connections, locks and open files in the function itself (made in its open())"
)


class UnpicklableRecord(TypeError):
    """A record could not be pickled to cross to another TaskManager. The task's failure report adds the
    operator that emitted it (the last one of its chain, which feeds every output of the task)."""


class UnpicklableState(TypeError):
    """An operator's state could not be pickled into a checkpoint or savepoint."""


def _culprit(values: list[Any]) -> Any:
    """The first of `values` that cannot be pickled (called only once pickling the lot failed)."""
    for value in values:
        try:
            cloudpickle.dumps(value, protocol=5)
        except Exception:
            return value
    return None


def unpicklable_record(values: list[Any], cause: BaseException) -> UnpicklableRecord:
    culprit = _culprit(values)
    what = "a record" if culprit is None else f"a record of type {type(culprit).__qualname__}"
    return UnpicklableRecord(f"{what} cannot be pickled to go to another TaskManager ({cause}); {_REMEDY}")


def unpicklable_state(operator_uid: str, cause: BaseException) -> UnpicklableState:
    return UnpicklableState(
        f"the state of operator {operator_uid!r} cannot be pickled into a checkpoint ({cause}); {_REMEDY}"
    )
