"""The operator never hands a damaged checkpoint to a new run (`last-state` upgrades, restarts).

The checkpoints here are real ones, written by the runtime's checkpoint coordinator to real files; the
damage is what a crash or a storage fault leaves behind: a state file cut short, or missing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import cast

import aiohttp
import pytest

from sluice.checkpoint.coordinator import CheckpointCoordinator
from sluice.transport.messages import ToTaskManager
from sluice_operator.kube import Kube
from sluice_operator.manifests import Owner
from sluice_operator.models import StreamJobStatus
from sluice_operator.services.clients.deps import Deps
from sluice_operator.services.clients.storage import Storage
from sluice_operator.services.common.plan import Event
from sluice_operator.services.observe.job import observe_job
from unit.runtime._support import SOURCE_STATE, acknowledge_all, source_coordinator

from ._fixtures import OWNER, spec
from ._situations import deployed_status


def _checkpoints(tmp_path: Path, count: int) -> str:
    """`count` completed checkpoints of job `job` under `tmp_path/chk`; returns that directory's URI."""
    sent: list[ToTaskManager] = []

    async def taken() -> CheckpointCoordinator:
        coord = source_coordinator(tmp_path, sent)
        coord.config.retained = count
        for checkpoint in range(1, count + 1):
            coord.trigger()
            acknowledge_all(coord, checkpoint)
            await coord.settle()
        return coord

    asyncio.run(taken())
    return f"file://{tmp_path / 'chk'}"


@pytest.mark.parametrize("damage", ["cut short", "missing"])
def test_a_damaged_newest_checkpoint_is_passed_over_for_the_one_before(tmp_path: Path, damage: str) -> None:
    root = _checkpoints(tmp_path, 2)
    state_file = tmp_path / "chk" / "job" / "chk-2" / "src-1.state"
    latest = asyncio.run(Storage().latest_checkpoint(root, "job"))
    assert latest is not None and latest.checkpoint_id == 2

    if damage == "cut short":
        state_file.write_bytes(SOURCE_STATE[:4])
    else:
        state_file.unlink()
    latest = asyncio.run(Storage().latest_checkpoint(root, "job"))
    assert latest is not None
    assert (latest.path, latest.checkpoint_id) == (f"{root}/job/chk-1", 1)


def test_a_run_whose_checkpoints_are_all_damaged_is_an_error_not_a_fresh_start(tmp_path: Path) -> None:
    root = _checkpoints(tmp_path, 1)
    (tmp_path / "chk" / "job" / "chk-1" / "src-0.state").unlink()
    # No checkpoint would have the new run start from the old run's restore point, and commit again
    # what the damaged checkpoint's sinks had committed: the operator reports it instead.
    with pytest.raises(RuntimeError, match=r"no retained checkpoint of job job can be restored"):
        asyncio.run(Storage().latest_checkpoint(root, "job"))


class _NoPods:
    """The coordinator pod is gone: a Kubernetes API with no pods and no Savepoints."""

    async def list_pods(self, namespace: str, selector: str) -> list[object]:
        return []

    async def list_custom(self, plural: str, namespace: str) -> list[object]:
        return []


def test_a_run_with_only_damaged_checkpoints_is_observed_as_a_storage_problem_saying_what_to_do(
    tmp_path: Path,
) -> None:
    root = _checkpoints(tmp_path, 1)
    (tmp_path / "chk" / "job" / "chk-1" / "src-0.state").unlink()
    job = spec()
    status = StreamJobStatus.model_validate(
        {**deployed_status(job), "job": {"id": "job", "state": "RUNNING"}}
    )
    obs = asyncio.run(
        observe_job(
            Deps(cast(Kube, _NoPods()), cast(aiohttp.ClientSession, None), _no_events),
            storage=Storage(),
            owner=OWNER,
            spec=job,
            status=status,
            checkpoint_dir=root,
            rest_token=None,
        )
    )
    # Nothing is decided from it: reconcile reports Degraded (StorageUnavailable) while no pod runs.
    assert obs.latest_checkpoint is None and obs.storage_error is not None
    assert "no retained checkpoint of job job can be restored" in obs.storage_error
    assert f"Delete the damaged checkpoint directories under {root}" in obs.storage_error


def _no_events(job: Owner, event: Event) -> None:
    raise AssertionError(f"observing posts no events, got {event}")
