"""Durations and command-line arguments: good input parses, bad input says what is wrong."""

from __future__ import annotations

import pytest

from sluice._durations import parse_duration
from sluice.cli import parser


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("1s", 1.0),
        ("1.5s", 1.5),
        ("10m", 600.0),
        ("1h", 3600.0),
        ("2", 2.0),
        ("0.25", 0.25),
        (" 3 s ", 3.0),
        ("0s", 0.0),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "1d", "-1s", "1 sec", "s", "1.s", "1e3ms", "1s2"])
def test_bad_durations_name_the_input_and_the_format(text: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_duration(text)
    assert str(caught.value) == f"{text!r} is not a duration; write it like 500ms, 1s, 10m or 1h"


def test_run_arguments_parse() -> None:
    args = parser().parse_args(
        [
            "run",
            "pipeline.py",
            "--arg",
            "n=2000000",
            "--arg",
            "out=/tmp/out=x",
            "--parallelism",
            "2",
            "--checkpoint-dir",
            "file:///tmp/chk",
            "--checkpoint-interval",
            "1s",
            "--min-pause",
            "250ms",
            "--no-checkpoints-after-tasks-finish",
        ]
    )
    assert args.command == "run" and args.pipeline == "pipeline.py"
    assert args.arg == [("n", "2000000"), ("out", "/tmp/out=x")]
    assert args.parallelism == 2
    assert args.checkpoint_dir == "file:///tmp/chk"
    assert args.checkpoint_interval == 1.0
    assert args.min_pause == 0.25
    assert args.no_checkpoints_after_tasks_finish is True


def test_run_defaults() -> None:
    args = parser().parse_args(["run", "p.py"])
    assert args.parallelism == 1 and args.max_parallelism == 128
    assert args.checkpoint_dir is None and args.checkpoint_interval is None
    assert args.no_checkpoints_after_tasks_finish is False
    assert args.arg == []


def test_stop_arguments() -> None:
    args = parser().parse_args(
        ["stop", "--address", "http://127.0.0.1:8081", "--drain", "--savepoint-dir", "/sp"]
    )
    assert (args.command, args.address, args.drain, args.savepoint_dir) == (
        "stop",
        "http://127.0.0.1:8081",
        True,
        "/sp",
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "p.py", "--arg", "novalue"], "argument --arg: 'novalue' is not key=value"),
        (["run", "p.py", "--arg", "=v"], "argument --arg: '=v' is not key=value"),
        (["run", "p.py", "--parallelism", "0"], "argument --parallelism: must be at least 1, got 0"),
        (["run", "p.py", "--taskmanagers", "-2"], "argument --taskmanagers: must be at least 1, got -2"),
        (
            ["run", "p.py", "--checkpoint-interval", "soon"],
            "argument --checkpoint-interval: 'soon' is not a duration; write it like 500ms, 1s, 10m or 1h",
        ),
        (["run", "p.py", "--host", "yarn"], "argument --host: invalid choice: 'yarn'"),
        (["run"], "the following arguments are required: pipeline"),
        (["status"], "the following arguments are required: --address"),
        (["stop", "--address", "x", "--drain=yes"], "argument --drain: ignored explicit argument 'yes'"),
        ([], "the following arguments are required: command"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        parser().parse_args(argv)
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: sluice")
    assert message in err


def test_non_number_parallelism_names_the_option_and_value(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["run", "p.py", "--parallelism", "two"])
    err = capsys.readouterr().err
    assert "argument --parallelism" in err and "'two'" in err
