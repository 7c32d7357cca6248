"""Act: carrying out a plan and recording it.

`execute` is the one place a plan's actions are carried out (the job's run, pods, Savepoints, Secrets
(`auth`), PodMonitor (`monitoring`), old runs' checkpoints) and the one holder of the `recorder`, the
one writer of status and events; `record` turns a decided status and what acting did into the merge
patch and the events it writes. Acting decides nothing: every outcome an action can have was decided
with the plan.
"""
