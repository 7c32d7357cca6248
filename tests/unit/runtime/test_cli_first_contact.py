"""The small things a first `sluice` command runs into: --version, defaults in --help, an address
without a scheme."""

from __future__ import annotations

import importlib.metadata
import re

import pytest

from sluice.cli import parser


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"sluice {importlib.metadata.version('sluice')}"


@pytest.mark.parametrize(
    ("option", "default"),
    [
        ("--parallelism", "default 1"),
        ("--checkpoints-retained", "default 1"),
        ("--max-restarts", "default 3"),
    ],
)
def test_run_help_states_the_defaults(capsys: pytest.CaptureFixture[str], option: str, default: str) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["run", "--help"])
    # After the usage lines; argparse wraps help text at the terminal width.
    text = " ".join(capsys.readouterr().out.split("options:", 1)[1].split())
    described = re.search(rf"{re.escape(option)} \S+ (.*?)(?= --|$)", text)
    assert described is not None and default in described.group(1), text


@pytest.mark.parametrize("command", ["status", "savepoint", "stop", "cancel"])
def test_an_address_without_a_scheme_means_http(command: str) -> None:
    args = parser().parse_args([command, "--address", "127.0.0.1:8081"])
    assert args.address == "http://127.0.0.1:8081"
    args = parser().parse_args([command, "--address", "https://coordinator:8081"])
    assert args.address == "https://coordinator:8081"


def test_a_rest_port_out_of_range_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(["run", "p.py", "--rest-port", "70000"])
    assert exited.value.code == 2
    said = capsys.readouterr().err
    assert "70000 is not a port: give 1 to 65535, 0 to pick a free one, or -1 to serve no REST API" in said
