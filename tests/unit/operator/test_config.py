"""The operator's configuration from its environment and command line."""

from __future__ import annotations

import pytest

from sluice_operator.__main__ import exact_namespaces, parse
from sluice_operator.models import ConfigError, OperatorConfig


def test_config_from_env() -> None:
    config = OperatorConfig.from_env(
        {
            "SLUICE_OPERATOR_STORAGE": "s3://bucket/root/",
            "SLUICE_OPERATOR_STORAGE_SECRET": "creds",
            "SLUICE_OPERATOR_JOB_ENV_AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
            "SLUICE_OPERATOR_RECONCILE_INTERVAL": "500ms",
        }
    )
    assert config.storage == "s3://bucket/root"
    assert config.storage_secret == "creds"
    assert config.job_env == {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"}
    assert config.reconcile_interval_s == 0.5


def test_defaults() -> None:
    config = OperatorConfig.from_env({})
    assert (config.storage, config.storage_secret, config.reconcile_interval_s) == (
        None,  # no default storage: a path in each pod would keep nothing
        None,
        5.0,
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SLUICE_OPERATOR_STORAGE": "bucket/root"}, "is not an absolute path or a URI"),
        (
            {"SLUICE_OPERATOR_RECONCILE_INTERVAL": "often"},
            "SLUICE_OPERATOR_RECONCILE_INTERVAL: 'often' is not a duration",
        ),
    ],
)
def test_bad_config_is_explained(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        OperatorConfig.from_env(env)


def test_namespaces_from_flags_or_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse(["-n", "a", "-n", "b"]).namespace == ["a", "b"]
    monkeypatch.setenv("SLUICE_OPERATOR_NAMESPACES", "x, y")
    assert parse([]).namespace == ["x", "y"]
    assert parse(["--all-namespaces"]).all_namespaces is True


def test_namespaces_are_required(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("SLUICE_OPERATOR_NAMESPACES", raising=False)
    with pytest.raises(SystemExit):
        parse([])
    assert "say which namespaces to watch" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("namespaces", "exact"),
    [
        (["jobs"], True),
        (["jobs-a", "jobs-b"], True),
        (["jobs-*"], False),
        (["!kube-system"], False),
        (["jobs-a,jobs-b"], False),
        (None, False),  # --all-namespaces
    ],
)
def test_only_namespace_patterns_need_namespace_discovery(namespaces: list[str] | None, exact: bool) -> None:
    # The chart's namespaced RBAC cannot list Namespaces; exact names must not need to.
    assert exact_namespaces(namespaces) is exact
