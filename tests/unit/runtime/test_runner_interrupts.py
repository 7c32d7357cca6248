"""SIGINT while `sluice run` builds its job: the run ends as an interrupted start (exit 130, the host
closed, nothing stored), never with a KeyboardInterrupt traceback. The integration test
`test_ctrl_c.py` sends a real SIGINT at a time it cannot choose; here the interrupt is raised at the
one place that once let it through: while the JobMaster is built (pickling the graph)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from sluice import _runner
from sluice.cli import parser

REPO = Path(__file__).resolve().parents[3]


class _Hosting:
    host = object()
    closed = 0

    def close(self) -> None:
        self.closed += 1


def test_sigint_while_the_job_is_built_ends_the_start_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = parser().parse_args(
        ["run", str(REPO / "examples" / "unbounded_counts.py"), "--arg", f"out={tmp_path / 'out'}",
         "--checkpoint-dir", f"file://{tmp_path / 'chk'}", "--host", "processes", "--rest-port", "0"]
    )  # fmt: skip

    def interrupted(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    hosting = _Hosting()
    monkeypatch.setattr(_runner, "make_host", lambda *_, **__: hosting)
    monkeypatch.setattr(_runner, "JobMaster", interrupted)
    previous = signal.getsignal(signal.SIGINT)
    try:
        code = _runner.run_command(args, default_checkpoint_dir=str(tmp_path / "default"))
    finally:
        signal.signal(signal.SIGINT, previous)
    err = capsys.readouterr().err
    assert code == _runner.EXIT_INTERRUPTED == 130
    assert "interrupted (SIGINT) before the job ran" in err.strip().splitlines()[-1], err
    assert hosting.closed == 1
    assert not list((tmp_path / "chk").glob("*/job-result.json"))
