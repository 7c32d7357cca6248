"""A user's exception shows once, with their own frames; the engine's frames only with --verbose; the
last line says `FAILED: <cause>`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from testkit.jobs import run_job

PIPELINE = """\
from sluice.connectors import PrintSink, SequenceSource


def parse(i):
    return 1 // (i - 500)


def build(env):
    (env.from_source(SequenceSource(0, 1000), uid="numbers")
        .map(parse, uid="parse")
        .sink_to(PrintSink(), uid="sink"))
"""


@pytest.mark.parametrize("verbose", [False, True], ids=["default", "verbose"])
def test_a_user_exception_shows_once_with_the_users_frames(tmp_path: Path, verbose: bool) -> None:
    pipeline = tmp_path / "divides.py"
    pipeline.write_text(PIPELINE)
    done = run_job(
        pipeline,
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--max-restarts",
        "2",
        "--restart-delay",
        "100ms",
        *(["--verbose"] if verbose else []),
        timeout=180,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    reported = [line for line in lines if "ERROR" in line and "ZeroDivisionError" in line]
    assert len(reported) == 1, done.stderr  # three attempts failed the same way: said once
    # Where: the operator's uid, the subtask, the record's place in its batch, and the record.
    assert re.search(r"\(in operator 'parse', subtask 0: record \d+ of a batch of \d+: 500\)$", reported[0])
    assert f'File "{pipeline}", line 5, in parse' in done.stderr
    assert "return 1 // (i - 500)" in done.stderr
    assert ("sluice/engine/task.py" in done.stderr) is verbose, done.stderr
    assert lines[-1].startswith("sluice: job ") and " FAILED: task " in lines[-1], lines[-1]
    assert "ZeroDivisionError" in lines[-1] and "None" not in lines[-1]
    assert "in operator 'parse', subtask 0: record " in lines[-1], lines[-1]
