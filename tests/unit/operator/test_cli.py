"""`sluice-operator` arguments: namespaces, leader election settings and their errors."""

from __future__ import annotations

import time

import pytest

from sluice_operator.__main__ import ENV_NAMESPACES, ENV_PEERING, ENV_PRIORITY, parse, start_time_priority


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ENV_NAMESPACES, ENV_PEERING, ENV_PRIORITY, "SLUICE_OPERATOR_PEERING_LIFETIME"):
        monkeypatch.delenv(name, raising=False)


def test_watched_namespaces_come_from_the_arguments_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert parse(["-n", "jobs", "-n", "etl"]).namespace == ["jobs", "etl"]
    monkeypatch.setenv(ENV_NAMESPACES, "jobs, etl")
    assert parse([]).namespace == ["jobs", "etl"]


def test_no_namespace_at_all_is_an_error_that_names_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse([])
    assert "--namespace NS, --all-namespaces or $SLUICE_OPERATOR_NAMESPACES" in capsys.readouterr().err


def test_replicas_with_peering_get_distinct_priorities_ranked_by_start_time() -> None:
    first = parse(["-n", "jobs", "--peering", "sluice"]).priority
    time.sleep(0.002)  # started a millisecond later at least: the ranking unit
    second = parse(["-n", "jobs", "--peering", "sluice"]).priority
    assert first is not None and second is not None
    # Kopf pauses every peer that shares a priority; the older replica must outrank the newer one.
    assert first > second
    assert max(first, second, start_time_priority()) < 0, "--priority 0 outranks every ranked replica"


def test_an_explicit_priority_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse(["-n", "jobs", "--peering", "sluice", "--priority", "5"]).priority == 5
    monkeypatch.setenv(ENV_PRIORITY, "7")
    assert parse(["-n", "jobs", "--peering", "sluice"]).priority == 7


def test_a_priority_that_is_not_a_number_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_PRIORITY, "high")
    with pytest.raises(SystemExit, match=r"\$SLUICE_OPERATOR_PRIORITY must be an integer, not 'high'"):
        parse(["-n", "jobs"])


def test_a_peer_lifetime_kopf_cannot_keep_alive_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(["-n", "jobs", "--peering", "sluice", "--peering-lifetime", "10"])
    assert "--peering-lifetime 10 is too short" in capsys.readouterr().err
    assert parse(["-n", "jobs", "--peering", "sluice", "--peering-lifetime", "15"]).peering_lifetime == 15


def test_standalone_overrides_peering_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_PEERING, "sluice")
    assert parse(["-n", "jobs"]).peering == "sluice"
    standalone = parse(["-n", "jobs", "--standalone"])
    assert standalone.peering is None and standalone.priority is None
