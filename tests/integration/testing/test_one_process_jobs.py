"""`sluice.testing`: whole jobs in the test process, with real checkpoints and the real restart path."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

import sluice
from sluice._runner import UsageError
from sluice.checkpoint.state_key import load_state_key
from sluice.checkpoint.storage import read_metadata
from sluice.connectors import GeneratorSource, SequenceSource
from sluice.testing import CollectingSink, FailingSource, ThreadHost, run_job, start_job

N = 2_000
MAIN = threading.get_ident()


def _square_pipeline(source: sluice.connectors.Source, sink: CollectingSink):  # type: ignore[no-untyped-def,type-arg]
    def build(env: sluice.StreamEnvironment) -> None:
        env.from_source(source, uid="numbers").map(lambda n: n * n, uid="square").sink_to(sink, uid="sink")

    return build


def test_a_bounded_job_finishes_and_its_sink_has_every_record_once() -> None:
    sink = CollectingSink()
    outcome = run_job(
        _square_pipeline(SequenceSource(0, N, splits=4), sink),
        "--parallelism",
        "2",
        "--checkpoint-interval",
        "50ms",
    )
    assert (outcome.state, outcome.exit_code, outcome.error) == ("FINISHED", 0, None)
    assert sorted(sink.records()) == [n * n for n in range(N)]
    # The final checkpoint (FLIP-147) committed the last records: the job recorded it.
    assert outcome.last_checkpoint is not None


def test_taskmanagers_are_threads_of_this_process() -> None:
    # The graph reaches the TaskManagers pickled: what a function saw comes back through the sink.
    sink = CollectingSink()

    def build(env: sluice.StreamEnvironment) -> None:
        env.from_source(SequenceSource(0, 100, splits=2), uid="numbers").map(
            lambda n: (threading.current_thread().name, threading.get_ident() != MAIN), uid="where"
        ).sink_to(sink, uid="sink")

    assert run_job(build, "--parallelism", "2").state == "FINISHED"
    threads = set(sink.records())
    # Two TaskManagers of the first attempt (attempt 0), neither the test's own thread.
    assert threads == {("sluice-taskmanager-0-0", True), ("sluice-taskmanager-0-1", True)}, threads


def test_an_injected_failure_restarts_from_the_checkpoint_and_the_output_stays_exactly_once() -> None:
    sink = CollectingSink()
    # Slow enough that checkpoints complete before the failing record: the restart restores state.
    numbers = GeneratorSource(lambda i: i, splits=2, rate=4_000, count=N)
    failing = FailingSource(numbers, fail_on=lambda n: n == N // 2, times=2)
    outcome = run_job(
        _square_pipeline(failing, sink),
        "--parallelism",
        "2",
        "--checkpoint-interval",
        "50ms",
        "--restart-delay",
        "0s",
    )
    assert outcome.state == "FINISHED", outcome
    assert failing.failures_left() == 0
    counts = Counter(sink.records())
    assert sorted(counts) == [n * n for n in range(N)]
    assert set(counts.values()) == {1}, [value for value, times in counts.items() if times > 1][:10]


def test_a_failure_beyond_the_restart_strategy_fails_the_job_with_the_cause() -> None:
    failing = FailingSource(SequenceSource(0, N), fail_on=lambda n: n == 7, times=5)
    outcome = run_job(
        _square_pipeline(failing, CollectingSink()), "--max-restarts", "1", "--restart-delay", "0s"
    )
    assert (outcome.state, outcome.exit_code) == ("FAILED", 1)
    assert outcome.error is not None and "injected failure at record 7" in outcome.error, outcome.error
    # One first attempt and one restart took a failure each.
    assert failing.failures_left() == 3


def test_savepoint_then_stop_without_drain_then_resume_continues_exactly_once(tmp_path: Path) -> None:
    sink = CollectingSink()
    numbers = GeneratorSource(lambda i: i, splits=2, rate=2_000)
    pipeline = _square_pipeline(numbers, sink)
    options = ["--parallelism", "2", "--checkpoint-interval", "50ms", "--savepoint-dir", f"file://{tmp_path}"]
    with start_job(pipeline, *options) as job:
        job.wait_checkpoints(2)
        running = job.savepoint()
        assert read_metadata(running, load_state_key()).checkpoint_id >= 1
        stopped = job.stop(drain=False)
        outcome = job.wait()
    # A stop with savepoint ends the job FINISHED in either mode (SUSPENDED is a coordinator shut down).
    assert (outcome.state, outcome.exit_code, outcome.stop_savepoint) == ("FINISHED", 0, stopped)
    assert stopped.startswith(f"file://{tmp_path}") and running != stopped
    before = sink.records()
    assert before, "nothing was committed before the stop"

    with start_job(pipeline, *options, "--from-savepoint", stopped) as resumed:
        resumed.wait_checkpoints(2)
        drained = resumed.stop(drain=True)
        outcome = resumed.wait()
    assert (outcome.state, outcome.stop_savepoint) == ("FINISHED", drained)
    counts = Counter(sink.records())
    assert len(counts) > len(set(before)), "the resumed run committed nothing"
    assert set(counts.values()) == {1}
    # Each split resumed right after its last record: the roots emitted form a gap-free prefix per split.
    roots = sorted(round(value**0.5) for value in counts)
    for split in (0, 1):
        mine = [n for n in roots if n % 2 == split]
        assert mine == list(range(split, mine[-1] + 1, 2))


def test_cancel_ends_a_running_job_as_canceled() -> None:
    with start_job(_square_pipeline(GeneratorSource(lambda i: i, rate=1_000), CollectingSink())) as job:
        job.cancel()
        outcome = job.wait()
    assert (outcome.state, outcome.exit_code) == ("CANCELED", 1)
    # Every TaskManager thread was ended and joined.
    assert isinstance(job.host, ThreadHost) and job.host.threads == []


def test_a_pipeline_sluice_run_would_refuse_is_refused_with_its_message() -> None:
    def build(env: sluice.StreamEnvironment) -> None:
        env.args["missing"]

    with pytest.raises(UsageError, match=r"missing argument 'missing' \(pass --arg missing=\.\.\.\)"):
        start_job(build)


def test_a_checkpoint_dir_given_either_way_is_used_and_kept(tmp_path: Path) -> None:
    a, b = f"file://{tmp_path / 'a'}", f"file://{tmp_path / 'b'}"
    for given in (("--checkpoint-dir", a), (f"--checkpoint-dir={b}",)):
        sink = CollectingSink()
        with start_job(_square_pipeline(SequenceSource(0, 10), sink), *given, "--job-id", "kept") as job:
            outcome = job.wait()
        assert outcome.state == "FINISHED"
        assert job.checkpoint_dir == given[-1].removeprefix("--checkpoint-dir=")
        # The harness removes only a directory it made: the caller's stays, with the job's result.
        assert (Path(job.checkpoint_dir.removeprefix("file://")) / "kept" / "job-result.json").is_file()
