"""Testing pipelines in one process: the job master and its TaskManagers, the same engine code.

`run_job` and `start_job` take what `sluice run` takes (a pipeline with `build(env)` and its options)
and run the job in the calling process: the coordinator on an event loop thread, each TaskManager on a
thread of its own, connected over loopback with the real handshake and messages. Checkpoints are real
(a temporary directory unless `--checkpoint-dir` names one), and a failing task takes the same failure
and restart path as on any host. `CollectingSink` collects what completed checkpoints commit;
`FailingSource` fails the job at a chosen record; `LocalJob.savepoint` and `LocalJob.stop` take a
savepoint, and stop with one. docs/testing.md shows a whole test.

    from sluice.testing import run_job

    outcome = run_job("my_pipeline.py", "--parallelism", "2", "--checkpoint-interval", "100ms")
    assert outcome.state == "FINISHED"
"""

from sluice.testing._job import JobOutcome, LocalJob, run_job, start_job
from sluice.testing._sinks import CollectingSink
from sluice.testing._sources import FailingSource, InjectedFailure
from sluice.testing._threads import ThreadHost

__all__ = [
    "CollectingSink",
    "FailingSource",
    "InjectedFailure",
    "JobOutcome",
    "LocalJob",
    "ThreadHost",
    "run_job",
    "start_job",
]
