"""The operator's copy of the runtime's states names every state the runtime reports.

A state the runtime reports and the operator's enum lacks is compared against nothing: `SUSPENDED`
(a coordinator shut down on SIGTERM) was missing once.
"""

from __future__ import annotations

from sluice._states import CheckpointStatus, JobState
from sluice_operator.models import RunState, TriggerState


def test_every_job_state_the_runtime_reports_is_a_run_state() -> None:
    assert {s.value for s in JobState} - {s.value for s in RunState} == set()


def test_every_savepoint_status_the_runtime_reports_is_a_trigger_state() -> None:
    assert {s.value for s in CheckpointStatus} - {s.value for s in TriggerState} == set()
