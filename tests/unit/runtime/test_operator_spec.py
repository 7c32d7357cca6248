"""Creating a subtask's operator from the job graph: the graph carries the factory without knowing the
operator type; the engine names the type it runs and gets a fresh, checked operator per subtask."""

from __future__ import annotations

import pytest

from sluice.engine.operators.base import StreamOperator
from sluice.graph.jobgraph import OperatorSpec


class Collecting(StreamOperator):
    def __init__(self, uid: str, seen: list[str]) -> None:
        self.uid = uid
        self.seen = seen


def test_each_subtask_gets_its_own_operator_and_its_own_copy_of_what_the_factory_holds() -> None:
    shared: list[str] = []
    spec = OperatorSpec("collect", "collect", "map", False, lambda uid: Collecting(uid, shared))
    first, second = spec.create(StreamOperator), spec.create(StreamOperator)
    assert isinstance(first, Collecting) and isinstance(second, Collecting)
    assert first.uid == second.uid == "collect"
    assert first is not second
    first.seen.append("only the first subtask's")
    assert second.seen == [] and shared == []


def test_a_factory_that_builds_no_operator_is_refused_naming_the_operator() -> None:
    spec = OperatorSpec("broken", "broken", "map", False, lambda uid: f"not an operator: {uid}")
    with pytest.raises(TypeError, match="the factory of operator 'broken' built a str, not a StreamOperator"):
        spec.create(StreamOperator)
