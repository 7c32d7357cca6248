"""Metrics of a real job: backpressure and busy time where Flink's definitions put them, and the same
figures at GET /metrics in Prometheus' text format, which needs the token when reads are protected."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from testkit.checkpoints import PIPELINES
from testkit.inprocess import ThreadJob
from testkit.jobs import SluiceJob, run_cli


def _scrape(url: str, token: str | None) -> str:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    with urllib.request.urlopen(urllib.request.Request(url + "/metrics", headers=headers), timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return str(r.read().decode())


def test_a_slow_sink_shows_as_backpressure_upstream_and_busy_time_in_the_sink(
    tmp_path: Path,
) -> None:
    job = SluiceJob(
        PIPELINES / "fan_out_slow_sink.py",
        "--taskmanagers",
        "1",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--rest-auth",
        "all",
    )
    try:

        def settled() -> dict[str, dict[str, float]] | None:
            vertices = {v["uids"][-1]: v["metrics"] for v in job.get("/v1/job")["vertices"]}
            if any(v["backPressuredTimeMsPerSecond"] is None for v in vertices.values()):
                return None
            # The 5 s window is full of the steady state once the source has read for a while.
            return vertices if vertices["slow"]["recordsIn"] > 10 * 1024 * 20 else None

        vertices = job.wait_until(settled, 60, "rates of a steady job")
        source, sink = vertices["numbers"], vertices["slow"]
        assert source["backPressuredTimeMsPerSecond"] > 500, source
        assert sink["busyTimeMsPerSecond"] > 500, sink
        assert sink["backPressuredTimeMsPerSecond"] == 0, sink
        assert sink["inputQueueUsage"] > 0.5, sink
        # The sink takes a batch (1,024 records at most) per 50 ms.
        assert 0 < sink["recordsInPerSecond"] < 1024 * 20 * 1.2, sink
        # Per subtask the three add up to the whole second (a vertex shows each one's worst subtask).
        for vertex in job.get("/v1/job")["vertices"]:
            for subtask in vertex["subtasks"]:
                figures = subtask["metrics"]
                times = (
                    "busyTimeMsPerSecond",
                    "backPressuredTimeMsPerSecond",
                    "idleTimeMsPerSecond",
                )
                assert sum(figures[k] for k in times) == pytest.approx(1000), figures

        url, token = job.rest_url(), job.token()
        with pytest.raises(urllib.error.HTTPError) as refused:
            _scrape(url, None)
        assert refused.value.code == 401
        families = {f.name: f for f in text_string_to_metric_families(_scrape(url, token))}
        pressured = {
            s.labels["vertex"]: s.value
            for s in families["sluice_subtask_backpressured_time_ms_per_second"].samples
        }
        assert pressured["numbers"] > 500, pressured
        running = [s for s in families["sluice_job_state"].samples if s.value == 1]
        assert [s.labels["state"] for s in running] == ["RUNNING"]
        records = families["sluice_subtask_records_in"].samples
        assert all(s.name == "sluice_subtask_records_in_total" and s.value > 0 for s in records), records
        assert families["sluice_checkpoints"].type == "counter"

        # What a person sees: the source's row says its backpressure is HIGH.
        status = run_cli("status", "--address", url, "--token", token)
        assert status.returncode == 0, status.stderr
        row = next(line for line in status.stdout.splitlines() if line.startswith("0 "))
        assert row.split()[1] == "numbers" and row.endswith("HIGH"), status.stdout
    finally:
        job.kill()


def test_backpressure_across_taskmanagers_is_the_senders_wait_for_its_socket(
    tmp_path: Path,
) -> None:
    # Two TaskManagers: one source subtask sends to the sink over TCP. Once the sink's queue is full
    # its TaskManager stops reading, the socket buffers fill, and the sender waits to drain. (Threads
    # of the test process: their data connections are TCP sockets all the same.)
    job = ThreadJob(
        PIPELINES / "fan_out_slow_sink.py",
        "--taskmanagers",
        "2",
        "--checkpoint-dir",
        f"file://{tmp_path}",
    )
    try:

        def sink_placement() -> list[int] | None:
            where = job.get("/v1/job")["vertices"][1]["subtasks"][0]["taskManager"]
            return None if where is None else [where]  # TaskManager 0 is falsy: wrap it

        [sink_tm] = job.wait_until(sink_placement, 60, "placement")

        def remote_source() -> dict[str, float] | None:
            vertex = job.get("/v1/job")["vertices"][0]
            remote = [s for s in vertex["subtasks"] if s["taskManager"] != sink_tm]
            assert remote, "a source subtask runs on the other TaskManager"
            figures = remote[0]["metrics"]
            pressured = figures["backPressuredTimeMsPerSecond"]
            return figures if pressured is not None and pressured > 500 else None

        job.wait_until(remote_source, 60, "the remote source backpressured most of the time")
    finally:
        job.kill()
