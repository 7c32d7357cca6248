"""Spark that did not start because a service did not answer (the Kubernetes API server slow or
restarting, a refused connection) is not a usage error: `sluice run` exits 4, which the operator
restarts, instead of 2, on which it gives up on the job until its spec changes. A wrong setting is
still a usage error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sluice import _runner
from sluice.cli import parser
from sluice.hosts.base import HostUnavailable
from sluice.hosts.spark._context import _unreachable

REPO = Path(__file__).resolve().parents[3]


class _Java:
    """The parts of a Py4J JavaObject for a Throwable that the classification reads."""

    def __init__(self, name: str, message: str, cause: _Java | None = None) -> None:
        self.name, self.message, self.cause = name, message, cause

    def getClass(self) -> Any:  # noqa: N802 (Java's name)
        return type("Class", (), {"getName": lambda _: self.name})()

    def getMessage(self) -> str:  # noqa: N802
        return self.message

    def getCause(self) -> _Java | None:  # noqa: N802
        return self.cause


class _Py4JError(Exception):
    def __init__(self, java: _Java) -> None:
        super().__init__("An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext")
        self.java_exception = java


def test_an_api_server_that_did_not_answer_is_named_as_unreachable() -> None:
    timeout = _Java(
        "io.fabric8.kubernetes.client.KubernetesClientException",
        "The timeout of 10000 ms has been exceeded when getting a connection to 10.96.0.1:443",
    )
    err = _Py4JError(
        _Java("org.apache.spark.SparkException", "External scheduler cannot be instantiated", timeout)
    )
    assert _unreachable(err) == (
        "KubernetesClientException: The timeout of 10000 ms has been exceeded when getting a connection "
        "to 10.96.0.1:443"
    )


def test_a_wrong_setting_is_not_unreachable() -> None:
    wrong = _Java("java.lang.IllegalArgumentException", "spark.executor.memory must be a size")
    assert _unreachable(_Py4JError(_Java("org.apache.spark.SparkException", "bad", wrong))) is None
    assert _unreachable(ValueError("not from the JVM")) is None


def test_a_cause_chain_that_loops_ends() -> None:
    looping = _Java("org.apache.spark.SparkException", "outer")
    looping.cause = looping
    assert _unreachable(_Py4JError(looping)) is None


def test_sluice_run_exits_4_on_an_unavailable_host_and_says_to_run_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = parser().parse_args(
        ["run", str(REPO / "examples" / "unbounded_counts.py"), "--arg", f"out={tmp_path / 'out'}",
         "--checkpoint-dir", f"file://{tmp_path / 'chk'}", "--rest-port", "0"]
    )  # fmt: skip

    def unavailable(*_: object, **__: object) -> None:
        raise HostUnavailable("Spark did not start: KubernetesClientException: timeout; see spark.log")

    monkeypatch.setattr(_runner, "make_host", unavailable)
    code = _runner.run_command(args, default_checkpoint_dir=str(tmp_path / "default"))
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == _runner.EXIT_UNAVAILABLE == 4
    assert "KubernetesClientException: timeout" in last and "run it again" in last, last
    assert not list((tmp_path / "chk").glob("*/job-result.json"))
