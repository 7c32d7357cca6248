"""The checkpoint protocol. The order of its steps, and where each step lives:

Coordinator (`coordinator.CheckpointCoordinator`):
  1. plan (`plan.plan_checkpoint`): trigger the running subtasks that have no running predecessor,
     wait for every running subtask, record finished ones. Declined at once when the feature flag
     `checkpoints-after-tasks-finish` is off and some subtask has finished.
  2. send the trigger with the checkpoint's storage location (it travels inside the barrier too).
Subtask (`subtask.SubtaskCheckpointer`, handed the barrier by `sluice.engine.task.StreamTask`):
  3. a triggered subtask (or one whose barriers have aligned on every open input channel, see
     `sluice.engine._alignment`) forwards the barrier downstream, then snapshots every operator of its
     chain synchronously (a pickle: a copy), then writes the state files asynchronously and acks with
     their handles and whether its operators have finished. A write failure declines the checkpoint.
     The module's docstring has these steps in detail, and the subtask's side of steps 6 and after.
Coordinator:
  4. a subtask that finishes before it acked fails the checkpoint at once; so does any decline, and
     the timeout. Finishing never cancels a pending checkpoint by itself.
  5. with every ack in: decline when an operator with union list state is partially finished; else
     write `_metadata` last (`storage.write_metadata`): operators whose subtasks all finished are
     recorded `fullyFinished` without state; the others with their running subtasks' state and the
     list of finished subtasks.
  6. only then notify every subtask (`notify_checkpoint_complete`): two-phase-commit sinks commit,
     and subtasks waiting for their final checkpoint close and exit. Older checkpoints beyond the
     retained count are deleted. An intermediate savepoint (one that does not stop the job) notifies
     nobody and is not a final checkpoint: recovery restores checkpoints, never savepoints, so its
     commits would be replayed (`pending.commits_side_effects`). Once every ack is in, the checkpoint
     directory belongs to the finalizer alone (see `coordinator`); a discard removes `_metadata` first.
Restore (`restore.restored_share`): each new subtask reads its share of state; fully finished
operators are not run again.
"""
