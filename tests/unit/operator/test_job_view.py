"""What `kubectl get streamjobs -o wide` shows of a running job, the dashboard URL, the state backend."""

from __future__ import annotations

from typing import Any

import pytest

from sluice_contract.rest import DocumentError
from sluice_operator import manifests as m
from sluice_operator.crdgen import streamjob_crd
from sluice_operator.services.common.observed import CoordinatorView, Observed
from sluice_operator.services.decide.job import decide

from ._fixtures import run, spec
from ._situations import NOW, OLD_ID, coordinator, ctx, deployed_status, pod, status_of


def test_rates_and_the_dashboard_url_of_a_running_job() -> None:
    job = spec()
    rates = {"recordsReadPerSecond": 1234.5678, "recordsWrittenPerSecond": None}
    plan = decide(
        ctx(job, deployed_status(job)), Observed(pod=pod(job), coordinator=coordinator(rates=rates))
    )
    assert status_of(plan)["job"]["recordsReadPerSecond"] == 1234.6
    assert "recordsWrittenPerSecond" not in status_of(plan)["job"]  # none measured: no figure
    assert status_of(plan)["dashboardUrl"] == "http://counts-rest.jobs.svc:8081/"


def test_no_stale_rates_or_url_once_the_coordinator_is_gone() -> None:
    job = spec()
    status = deployed_status(job, dashboardUrl="http://counts-rest.jobs.svc:8081/")
    status["job"]["recordsReadPerSecond"] = 10.0
    exited = pod(job, phase="Failed")
    plan = decide(ctx(job, status), Observed(pod=exited))
    assert "dashboardUrl" not in status_of(plan)
    assert "recordsReadPerSecond" not in (status_of(plan).get("job") or {})


def test_wide_columns_show_records_per_second_and_the_last_checkpoints_age() -> None:
    (version,) = streamjob_crd()["spec"]["versions"]
    wide = {c["name"]: c for c in version["additionalPrinterColumns"] if c.get("priority") == 1}
    assert wide["Records/s"]["jsonPath"] == ".status.job.recordsReadPerSecond"
    assert (wide["Checkpointed"]["type"], wide["Checkpointed"]["jsonPath"]) == (
        "date",
        ".status.lastCheckpoint.time",
    )


def test_the_state_backend_reaches_sluice_run_and_changing_it_restarts_the_job() -> None:
    args = m.sluice_run_args(run(stateBackend="disk"))
    assert args[args.index("--state-backend") + 1] == "disk"
    default = m.sluice_run_args(run())
    assert default[default.index("--state-backend") + 1] == "heap"
    assert m.spec_hash(spec(stateBackend="disk")) != m.spec_hash(spec())
    # A field at its default changes nothing: a newer operator's new fields do not restart running jobs.
    assert m.spec_hash(spec(stateBackend="heap")) == m.spec_hash(spec())


def test_the_last_checkpoint_says_what_it_cost_and_a_figure_out_of_range_is_left_out() -> None:
    job = spec()
    latest = coordinator().latest_checkpoint
    assert latest is not None

    def with_history(*history: dict[str, Any]) -> CoordinatorView:
        return CoordinatorView.parse(
            {"jobId": OLD_ID, "state": "RUNNING"}, {"latest": latest.to_json(), "history": list(history)}
        )

    record = {"kind": "checkpoint", "status": "COMPLETED", "triggerTime": NOW}
    view = with_history(
        {**record, "id": 8, "status": "FAILED", "durationMs": 1},
        {
            **record,
            "id": 7,
            "durationMs": 412,
            "syncMs": 0.8,
            "asyncMs": 390.5,
            "bytesWritten": 2097152,
            "stateSize": 190,
        },
    )
    status = status_of(decide(ctx(job, deployed_status(job)), Observed(pod=pod(job), coordinator=view)))
    last = status["lastCheckpoint"]
    assert (last["id"], last["durationMs"], last["syncMs"], last["asyncMs"]) == (7, 412, 0.8, 390.5)
    assert (last["bytesWritten"], last["stateSize"]) == (2097152, 190)

    view = with_history({**record, "id": 7, "syncMs": float("inf"), "stateSize": -1})
    status = status_of(decide(ctx(job, deployed_status(job)), Observed(pod=pod(job), coordinator=view)))
    assert not {"durationMs", "syncMs", "stateSize"} & status["lastCheckpoint"].keys()


def test_a_checkpoint_figure_that_is_not_a_number_makes_the_document_refused_with_the_field_named() -> None:
    record = {"id": 7, "kind": "checkpoint", "status": "COMPLETED", "triggerTime": NOW, "syncMs": "fast"}
    with pytest.raises(
        DocumentError,
        match=r"^checkpoints history\[0\]: 'syncMs' must be a number or null, not a string \(\"fast\"\)$",
    ):
        CoordinatorView.parse({"jobId": OLD_ID, "state": "RUNNING"}, {"history": [record]})
