"""The resource models accept what users write and reject mistakes with messages that say how to fix them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sluice_operator.models import (
    JobState,
    SavepointSpec,
    SavepointState,
    StopMode,
    StreamJobSpec,
    StreamJobStatus,
    UpgradeMode,
    duration_ms,
)


def _spec(**overrides: object) -> dict[str, object]:
    base: dict[str, object] = {"image": "sluice:dev", "pipeline": {"file": "examples/w1_window_counts.py"}}
    base.update(overrides)
    return base


def test_minimal_spec_takes_defaults() -> None:
    spec = StreamJobSpec.model_validate(_spec())
    assert spec.state is JobState.RUNNING
    assert spec.upgrade_mode is UpgradeMode.SAVEPOINT
    assert spec.parallelism == 1
    assert spec.task_managers.replicas == 1
    assert spec.checkpoints.interval == "10s"
    assert spec.checkpoints.after_tasks_finish is True


def test_wire_names_are_camel_case() -> None:
    spec = StreamJobSpec.model_validate(
        _spec(upgradeMode="last-state", taskManagers={"replicas": 3}, allowNonRestoredState=True)
    )
    assert spec.upgrade_mode is UpgradeMode.LAST_STATE
    dumped = spec.model_dump(by_alias=True, exclude_none=True)
    assert dumped["taskManagers"]["replicas"] == 3
    assert dumped["allowNonRestoredState"] is True


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"state": "paused"}, "'running', 'suspended' or 'finished'"),
        ({"upgradeMode": "hot"}, "'stateless', 'savepoint' or 'last-state'"),
        ({"parallelism": 0}, "greater than or equal to 1"),
        ({"checkpoints": {"interval": "10 seconds"}}, "a duration such as 500ms"),
        ({"checkpoints": {"storage": "bucket/prefix"}}, "an absolute path or a URI with a scheme"),
        ({"pipeline": {"file": "a.py", "module": "a"}}, "exactly one of pipeline.file and pipeline.module"),
        ({"pipeline": {}}, "exactly one of pipeline.file and pipeline.module"),
        ({"sparkConf": {"executor.memory": "1g"}}, "must start with 'spark.'"),
        ({"serviceAccount": "Bad_Name"}, "a Kubernetes object name"),
        ({"paralelism": 2}, "Extra inputs are not permitted"),
    ],
)
def test_bad_values_are_rejected_with_a_clear_message(overrides: dict[str, object], fragment: str) -> None:
    with pytest.raises(ValidationError) as caught:
        StreamJobSpec.model_validate(_spec(**overrides))
    assert fragment in str(caught.value)


@pytest.mark.parametrize(
    ("text", "millis"), [("500ms", 500), ("10s", 10_000), ("5m", 300_000), ("1h", 3_600_000)]
)
def test_durations_use_the_runtime_cli_format(text: str, millis: int) -> None:
    assert duration_ms(text) == millis


def test_savepoint_spec() -> None:
    spec = SavepointSpec.model_validate({"jobName": "counts", "stop": "suspend"})
    assert spec.stop is StopMode.SUSPEND
    assert spec.backoff_limit == 0
    with pytest.raises(ValidationError, match="'none', 'suspend' or 'terminate'"):
        SavepointSpec.model_validate({"jobName": "counts", "stop": "drain"})


def test_savepoint_terminal_states() -> None:
    assert {s for s in SavepointState if s.terminal} == {
        SavepointState.COMPLETED,
        SavepointState.FAILED,
        SavepointState.ABANDONED,
    }


def test_status_ignores_fields_of_a_newer_operator() -> None:
    status = StreamJobStatus.model_validate({"lifecycleState": "Running", "somethingNew": 1})
    assert status.lifecycle_state == "Running"
