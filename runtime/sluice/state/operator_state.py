"""Non-keyed operator state: list state, union list state and broadcast state.

On restore with another parallelism, list state is dealt round-robin over the new subtasks, union list
state is given whole to every subtask, and broadcast state is copied from one subtask (all subtasks hold
the same broadcast state, so any running one will do).
"""

from __future__ import annotations

from typing import Any


class OperatorStateStore:
    def __init__(self) -> None:
        self.lists: dict[str, list[Any]] = {}
        self.unions: dict[str, list[Any]] = {}
        self.broadcast: dict[str, dict[Any, Any]] = {}

    def list_state(self, name: str) -> list[Any]:
        """The live list for `name`: mutate it in place; it is what the next snapshot stores."""
        return self.lists.setdefault(name, [])

    def union_list_state(self, name: str) -> list[Any]:
        return self.unions.setdefault(name, [])

    def broadcast_state(self, name: str) -> dict[Any, Any]:
        return self.broadcast.setdefault(name, {})

    def is_empty(self) -> bool:
        return not (any(self.lists.values()) or any(self.unions.values()) or any(self.broadcast.values()))
