"""Deciding which checkpoint directories of a job's earlier runs go (act deletes them).

Every run of a StreamJob gets a new job id, and the runtime keeps `spec.checkpoints.retained` checkpoints
under `<checkpoint-dir>/<job-id>/` of the run that wrote them; nothing else ever removes a finished
run's directory. The operator records each run it starts (`status.checkpointRuns`) and deletes an
earlier run's directory once nothing can restore from it any more:

- the current run is RUNNING and has completed a checkpoint of its own, so a restart of it (by the
  runtime's restart strategy, or a new run after a lost coordinator) starts from that checkpoint;
- it is not the run the current run was restored from (a last-state upgrade or a lost coordinator
  restores from a checkpoint of the previous run: kept while the current run lives, as a fallback);
- no savepoint, the last savepoint or the last checkpoint in the status lies inside it (a Savepoint may
  target the checkpoint storage).

Only runs this StreamJob started are ever touched: a checkpoint storage shared by several jobs, or runs
of an earlier StreamJob of the same name, are left alone.
"""

from __future__ import annotations

from sluice_operator import manifests as m
from sluice_operator.models import RunState, SavepointState

from ..common.context import JobContext
from ..common.observed import Observed
from ..common.plan import DeleteCheckpointRuns, DeletePods, Plan, StartRun


def run_of(path: str | None, checkpoint_dir: str) -> str | None:
    """The run id of a path inside `<checkpoint_dir>/<run>/...`, else None."""
    prefix = checkpoint_dir.rstrip("/") + "/"
    if not path or not path.startswith(prefix):
        return None
    run = path[len(prefix) :].split("/", 1)[0]
    return run or None


def expired_runs(ctx: JobContext, obs: Observed, checkpoint_dir: str) -> list[str]:
    """The earlier runs whose directories may go now, oldest first; [] while that is not certain."""
    current = ctx.status.job.id if ctx.status.job is not None else None
    coordinator = obs.coordinator
    if current is None or coordinator is None or coordinator.job_id != current:
        return []
    if coordinator.state != RunState.RUNNING:
        return []
    latest = coordinator.latest_checkpoint
    if run_of(latest.path if latest is not None else None, checkpoint_dir) != current:
        return []  # no checkpoint of its own yet: a restart would start from where this run did
    referenced = [ctx.status.job.restored_from if ctx.status.job is not None else None]
    referenced += [v.status.path for v in obs.savepoints if v.status.state is SavepointState.COMPLETED]
    referenced += [s.path for s in ctx.status.savepoint_history]
    if ctx.status.last_savepoint is not None:
        referenced.append(ctx.status.last_savepoint.path)
    if ctx.status.last_checkpoint is not None:
        referenced.append(ctx.status.last_checkpoint.path)
    keep = {current} | {run for path in referenced if (run := run_of(path, checkpoint_dir))}
    return [run for run in ctx.status.checkpoint_runs if run not in keep]


def plan_expired_runs(ctx: JobContext, obs: Observed, plan: Plan) -> None:
    """Add the deletion of expired runs to `plan`, unless it starts a run or deletes pods: the run that
    would have to be safe to restart from its own checkpoint is then the one going away."""
    if any(isinstance(action, StartRun | DeletePods) for action in plan.actions):
        return
    checkpoint_dir = m.checkpoint_dir(ctx.spec, ctx.owner, ctx.config)
    expired = expired_runs(ctx, obs, checkpoint_dir)
    if expired:
        remaining = tuple(run for run in plan.status.checkpoint_runs if run not in expired)
        plan.actions.append(DeleteCheckpointRuns(checkpoint_dir, tuple(expired), remaining))


def remember_run(runs: list[str], job_id: str) -> list[str]:
    """`status.checkpointRuns` after starting run `job_id`."""
    return [*[r for r in runs if r != job_id], job_id]
