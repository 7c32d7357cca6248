"""Specs the schema lets through but the operator cannot act on get a message naming field and fix."""

from __future__ import annotations

import pytest

from sluice_operator.services.observe.validate import InvalidSpecError, savepoint_spec, streamjob_spec


def _raw(**overrides: object) -> dict[str, object]:
    return {"image": "sluice:dev", "pipeline": {"file": "p.py"}, **overrides}


def test_a_good_spec_passes() -> None:
    assert streamjob_spec(_raw(parallelism=2, taskManagers={"replicas": 2})).parallelism == 2


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            _raw(sparkConf={"spark.kubernetes.namespace": "x"}),
            "spec.sparkConf: spark.kubernetes.namespace is set by the operator",
        ),
        (
            _raw(taskManagers={"resources": {"limits": {"memory": "300Mi"}}}),
            "spec.taskManagers.resources memory 300Mi is too small",
        ),
        (
            _raw(taskManagers={"replicas": 3}),
            "spec.taskManagers.replicas (3) is more than spec.parallelism (1)",
        ),
        (_raw(checkpoints={"interval": "soon"}), "spec.checkpoints.interval: 'soon' is not a duration"),
        (_raw(state="paused"), "spec.state: Input should be 'running', 'suspended' or 'finished'"),
        ({"pipeline": {"file": "p.py"}}, "spec.image: Field required"),
        (None, "spec is missing"),
    ],
)
def test_problems_are_named(raw: object, message: str) -> None:
    with pytest.raises(InvalidSpecError) as caught:
        streamjob_spec(raw)
    assert message in str(caught.value)


def test_savepoint_spec_errors() -> None:
    with pytest.raises(InvalidSpecError, match=r"spec.jobName: Field required"):
        savepoint_spec({"stop": "none"})
