"""Bad pipelines and bad arguments give a one-line error naming the file and the problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.inprocess import run_thread_job
from testkit.jobs import REPO, run_job


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (None, "no such pipeline file"),
        ("def build(env)\n    pass\n", "syntax error"),
        ("import not_a_module_anywhere\n", "failed to import: ModuleNotFoundError"),
        ("x = 1\n", "defines no build(env) function"),
        ("build = 3\n", "build is not a function"),
        ("def build(env):\n    env.args['out']\n", "missing argument 'out' (pass --arg out=...)"),
    ],
    ids=["missing", "syntax", "import", "no-build", "build-not-callable", "missing-arg"],
)
def test_bad_pipeline_gives_one_line_error(tmp_path: Path, source: str | None, expected: str) -> None:
    pipeline = tmp_path / "pipeline.py"
    if source is not None:
        pipeline.write_text(source)
    done = run_job(pipeline, "--checkpoint-dir", f"file://{tmp_path / 'chk'}", timeout=60)
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "pipeline.py" in lines[0] and expected in lines[0]
    assert "Traceback" not in done.stderr


def test_stateful_operator_without_uid_is_refused_at_build_time(tmp_path: Path) -> None:
    pipeline = tmp_path / "no_uid.py"
    pipeline.write_text(
        "from sluice.connectors import PrintSink, SequenceSource\n"
        "def build(env):\n"
        "    env.from_source(SequenceSource(0, 10), uid='numbers').sink_to(PrintSink())\n"
    )
    done = run_job(pipeline, "--checkpoint-dir", f"file://{tmp_path / 'chk'}", timeout=60)
    assert done.returncode == 2
    assert "no_uid.py:3" in done.stderr and "needs a uid" in done.stderr


def test_checkpoint_write_failure_declines_and_the_next_checkpoint_completes(tmp_path: Path) -> None:
    chk = tmp_path / "chk"
    (chk / "blocked").mkdir(parents=True)
    (chk / "blocked" / "chk-2").write_text("a file where checkpoint 2's directory should go")
    # The job master logs the declined checkpoint wherever TaskManagers run: here on threads of the test.
    done = run_thread_job(
        REPO / "tests" / "integration" / "pipelines" / "generated_counts.py",
        "--arg",
        f"out={tmp_path / 'out'}",
        "--arg",
        "count=20000",
        "--arg",
        "rate=10000",
        "--checkpoint-dir",
        f"file://{chk}",
        "--checkpoint-interval",
        "200ms",
        "--job-id",
        "blocked",
        "--checkpoints-retained",
        "10",
    )
    assert done.returncode == 0, done.stderr
    assert "checkpoint 2 failed: writing state" in done.stderr
    completed = sorted(int(p.parent.name[4:]) for p in (chk / "blocked").glob("chk-*/_metadata"))
    assert any(c > 2 for c in completed), "checkpoints after the failed one completed"
