"""A Savepoint fails on its own only when it cannot be taken at all: an invalid spec, or no such job."""

from __future__ import annotations

from dataclasses import replace

from sluice_operator.models import SavepointState
from sluice_operator.services.common.plan import Event, PatchSavepoint
from sluice_operator.services.decide.savepoint_alone import fail_alone

from ._situations import savepoint


def test_a_savepoint_of_an_existing_job_is_left_to_the_job() -> None:
    assert fail_alone(savepoint("sp-1"), "ns", job_exists=True) is None


def test_a_savepoint_of_a_missing_job_fails_naming_the_job_and_namespace() -> None:
    view = replace(savepoint("sp-1", state="Pending"), uid="u-1")
    plan = fail_alone(view, "team-a", job_exists=False)
    assert plan is not None
    [action] = plan.actions
    assert isinstance(action, PatchSavepoint) and action.name == "sp-1"
    assert action.status.state is SavepointState.FAILED
    assert action.status.error is not None
    assert action.status.error.startswith("StreamJob 'counts' not found in namespace 'team-a'")
    assert plan.events == [Event("Warning", "Failed", action.status.error, savepoint="sp-1", uid="u-1")]


def test_a_savepoint_with_an_invalid_spec_fails_with_the_spec_error_whether_or_not_a_job_exists() -> None:
    view = replace(savepoint("sp-1"), spec=None, spec_error="spec.stop: Input should be 'none'")
    for job_exists in (True, False):
        plan = fail_alone(view, "ns", job_exists=job_exists)
        assert plan is not None
        [action] = plan.actions
        assert isinstance(action, PatchSavepoint)
        assert action.status.state is SavepointState.FAILED
        assert action.status.error == "spec.stop: Input should be 'none'"
