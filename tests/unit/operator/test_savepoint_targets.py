"""Where a user's Savepoint may write: the job's own directories and the operator's allowed prefixes."""

from __future__ import annotations

import dataclasses

import pytest

from sluice_operator import manifests as m
from sluice_operator.models import OperatorConfig, SavepointSpec, SavepointStatus
from sluice_operator.models.config import ConfigError
from sluice_operator.services.common.observed import Observed, SavepointView
from sluice_operator.services.common.plan import PatchSavepoint, SetDesiredState, TriggerSavepoint
from sluice_operator.services.decide.job import decide

from ._fixtures import CONFIG, OWNER, run, spec
from ._situations import coordinator, ctx, deployed_status, pod, status_of

OWN_SAVEPOINTS = "s3://bucket/sluice/savepoints/jobs/counts"
OWN_CHECKPOINTS = "s3://bucket/sluice/checkpoints/jobs/counts"
BACKUPS = "s3://backups/savepoints"


def _allowed(config: OperatorConfig = CONFIG) -> list[str]:
    return m.allowed_savepoint_prefixes(spec(), OWNER, config)


def test_the_jobs_own_directories_are_allowed_then_the_operators_prefixes() -> None:
    assert _allowed() == [OWN_SAVEPOINTS, OWN_CHECKPOINTS]
    extra = dataclasses.replace(CONFIG, allowed_savepoint_prefixes=(BACKUPS,))
    assert _allowed(extra) == [OWN_SAVEPOINTS, OWN_CHECKPOINTS, BACKUPS]


@pytest.mark.parametrize(
    "target",
    [OWN_SAVEPOINTS, f"{OWN_SAVEPOINTS}/", f"{OWN_SAVEPOINTS}/manual-1", f"{OWN_CHECKPOINTS}/x/../y"],
)
def test_targets_under_an_allowed_prefix_pass(target: str) -> None:
    assert m.target_refusal(target, _allowed()) is None


@pytest.mark.parametrize(
    "target",
    [
        "s3://bucket/sluice/savepoints/jobs/counts-other",  # a sibling sharing the name's start
        f"{OWN_SAVEPOINTS}/../../other-namespace/job",  # climbing out
        "s3://bucket/sluice",  # above the job's directories
        "gs://bucket/sluice/savepoints/jobs/counts",  # another scheme
        "file:///var/lib/sluice/savepoints/jobs/counts",
    ],
)
def test_targets_outside_are_refused_naming_the_allowed_prefixes(target: str) -> None:
    refusal = m.target_refusal(target, _allowed())
    assert refusal is not None
    assert repr(target) in refusal and OWN_SAVEPOINTS in refusal and OWN_CHECKPOINTS in refusal
    assert "allowedSavepointPrefixes" in refusal


def test_a_plain_path_is_a_file_uri() -> None:
    assert m.target_refusal("/data/sp/1", ["file:///data/sp"]) is None
    assert m.target_refusal("file:///data/sp/1", ["/data/sp"]) is None
    assert m.target_refusal("/data/spx", ["/data/sp"]) is not None


def test_the_operators_prefixes_come_from_its_environment_and_reach_the_coordinator() -> None:
    env = {
        "SLUICE_OPERATOR_STORAGE": "s3://bucket/sluice",
        "SLUICE_OPERATOR_ALLOWED_SAVEPOINT_PREFIXES": f" {BACKUPS}/ , file:///mnt/sp,",
    }
    config = OperatorConfig.from_env(env)
    assert config.allowed_savepoint_prefixes == (BACKUPS, "file:///mnt/sp")
    with pytest.raises(ConfigError, match="ALLOWED_SAVEPOINT_PREFIXES: 'backups' is not"):
        OperatorConfig.from_env({"SLUICE_OPERATOR_ALLOWED_SAVEPOINT_PREFIXES": "backups"})

    args = m.sluice_run_args(dataclasses.replace(run(), config=config))
    allowed = [args[i + 1] for i, a in enumerate(args) if a == "--savepoint-dir-allow"]
    assert allowed == [BACKUPS, "file:///mnt/sp"]
    assert "--savepoint-dir-allow" not in m.sluice_run_args(run())  # the job's own are the default


def _users_savepoint(target: str, stop: str = "none") -> SavepointView:
    return SavepointView(
        name="mine",
        spec=SavepointSpec.model_validate({"jobName": "counts", "stop": stop, "targetDirectory": target}),
        status=SavepointStatus(),
        labels={},
        created="2023-11-14T22:00:00Z",
        owned=False,
    )


@pytest.mark.parametrize("stop", ["none", "terminate"])
def test_a_savepoint_outside_is_failed_by_the_operator_before_any_call(stop: str) -> None:
    job = spec()
    plan = decide(
        ctx(job, deployed_status(job)),
        Observed(pod=pod(job), coordinator=coordinator(), savepoints=[_users_savepoint(BACKUPS, stop)]),
    )
    assert not [a for a in plan.actions if isinstance(a, TriggerSavepoint | SetDesiredState)], plan.actions
    (patch,) = [a for a in plan.actions if isinstance(a, PatchSavepoint)]
    assert patch.status.state == "Failed"
    assert f"{BACKUPS!r} is not under an allowed savepoint location" in (patch.status.error or "")
    assert OWN_SAVEPOINTS in (patch.status.error or "")
    assert status_of(plan)["lifecycleState"] == "Running"


def test_a_savepoint_under_an_allowed_prefix_is_triggered_there() -> None:
    job = spec()
    context = ctx(job, deployed_status(job))
    context = dataclasses.replace(
        context, config=dataclasses.replace(CONFIG, allowed_savepoint_prefixes=(BACKUPS,))
    )
    plan = decide(
        context,
        Observed(pod=pod(job), coordinator=coordinator(), savepoints=[_users_savepoint(f"{BACKUPS}/one")]),
    )
    (trigger,) = [a for a in plan.actions if isinstance(a, TriggerSavepoint)]
    assert trigger.target_directory == f"{BACKUPS}/one"
