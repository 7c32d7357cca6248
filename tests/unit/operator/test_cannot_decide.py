"""Storage that cannot be read stops the decision only while it is what says how the last run ended."""

from __future__ import annotations

import pytest

from sluice_operator.services.common.observed import Observed
from sluice_operator.services.decide.job import cannot_decide

from ._fixtures import spec
from ._situations import coordinator, pod

_ERROR = "cannot read s3://b/chk: ConnectionError: no route"


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_unreadable_storage_with_the_coordinator_pod_exited_stops_the_decision(phase: str) -> None:
    assert cannot_decide(Observed(pod=pod(spec(), phase), storage_error=_ERROR)) == _ERROR


def test_unreadable_storage_with_no_coordinator_pod_stops_the_decision() -> None:
    assert cannot_decide(Observed(storage_error=_ERROR)) == _ERROR


@pytest.mark.parametrize("phase", ["Pending", "Running"])
def test_a_live_coordinator_pod_is_decided_on_despite_unreadable_storage(phase: str) -> None:
    observed = Observed(pod=pod(spec(), phase), coordinator=coordinator(), storage_error=_ERROR)
    assert cannot_decide(observed) is None


def test_readable_storage_is_decided_on() -> None:
    assert cannot_decide(Observed()) is None
    assert cannot_decide(Observed(pod=pod(spec(), "Succeeded"))) is None
