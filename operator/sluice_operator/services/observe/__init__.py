"""Observe: reading the world a decision starts from.

The StreamJob and Savepoint objects, parsed and validated (`validate`, `privileges`), the job's pods,
the coordinator's REST API and storage (`job`), what the job's Secrets hold (`auth`), gathered with the
decision's context (`gather`). Nothing here writes or decides.
"""
