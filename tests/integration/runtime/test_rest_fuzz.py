"""The coordinator's REST API fuzzed from its OpenAPI document (docs/reference/openapi.yaml) with
schemathesis, against a real running job: no request gets a 5xx or an answer the document does not
describe, the job keeps running through all of it, and afterwards stops with a savepoint as usual.

The job runs with `--rest-auth all` (what the operator uses) and with a savepoint directory that is a
file, so that no fuzzed savepoint request (nor stop with savepoint, which would end the job as it should)
can be written: the one savepoint of the test goes to a `--savepoint-dir-allow` prefix no generator will
guess.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from requests.structures import CaseInsensitiveDict
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from testkit.jobs import REPO, SluiceJob, run_cli

OPENAPI = REPO / "docs" / "reference" / "openapi.yaml"
UNBOUNDED = REPO / "examples" / "unbounded_counts.py"
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
EXAMPLES = 30


def _fuzz(
    url: str, label: str, authorization: str | None, mode: GenerationMode, seen: dict[int, int]
) -> None:
    schema = schemathesis.openapi.from_path(OPENAPI)
    operation = schema.find_operation_by_label(label)
    assert operation is not None, label

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,  # the same requests every run: a failure here is reproducible
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: schemathesis.Case[Any]) -> None:
        headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
        if authorization is not None:
            headers["Authorization"] = authorization
        case.headers = CaseInsensitiveDict(headers)
        response = case.call(base_url=url, timeout=10)
        seen[response.status_code] = seen.get(response.status_code, 0) + 1
        case.validate_response(response, checks=CHECKS)

    run()


def test_fuzzed_requests_get_no_server_error_and_the_job_keeps_running(tmp_path: Path) -> None:
    kept = tmp_path / "kept-savepoints"
    unwritable = tmp_path / "not-a-directory"
    unwritable.write_text("savepoints cannot be written below a file\n")
    job = SluiceJob(
        UNBOUNDED,
        "--arg",
        f"out={tmp_path / 'out'}",
        "--arg",
        "rate=500",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval",
        "500ms",
        "--rest-auth",
        "all",
        "--savepoint-dir-allow",
        f"file://{kept}",
        "--savepoint-dir",
        f"file://{unwritable}",
    )
    try:
        job.wait_checkpoints(1)
        url, token = job.rest_url(), job.token()
        running: Callable[[], bool] = lambda: job.get("/v1/job")["state"] == "RUNNING"  # noqa: E731
        reads = [
            "GET /v1/health",
            "GET /v1/job",
            "GET /v1/checkpoints",
            "GET /v1/savepoints/{triggerId}",
            "GET /metrics",
            "GET /",
            "GET /dashboard/{name}",
        ]
        mutations = ["POST /v1/savepoints", "POST /v1/job/cancel"]
        seen: dict[int, int] = {}
        for authorization in (None, "Bearer not-the-token"):
            for label in reads + mutations:
                _fuzz(url, label, authorization, GenerationMode.POSITIVE, seen)
        assert seen.get(401) and seen.get(403), seen
        assert running(), "requests without the right token changed nothing"
        # With the token: everything but a cancel, which would end the job as it should; and savepoint
        # bodies that break the document's rules (the only input that can be of a wrong type).
        for label in [*reads, "POST /v1/savepoints"]:
            _fuzz(url, label, f"Bearer {token}", GenerationMode.POSITIVE, seen)
        _fuzz(url, "POST /v1/savepoints", f"Bearer {token}", GenerationMode.NEGATIVE, seen)
        assert seen.get(400), f"fuzzed savepoint bodies were refused as bad requests: {seen}"
        assert not any(status >= 500 for status in seen), seen
        assert running(), job.stderr
        assert not kept.exists(), "no fuzzed request wrote a savepoint"
        assert {p.name for p in tmp_path.iterdir()} <= {"chk", "out", unwritable.name}, (
            "nothing else was written"
        )

        stop = run_cli("stop", "--address", url, "--savepoint-dir", f"file://{kept}")
        assert stop.returncode == 0, stop.stderr + job.stderr
        assert job.wait(60) == 0, job.stderr
    finally:
        job.kill()
    savepoint = Path(stop.stdout.strip().splitlines()[-1].removeprefix("file://"))
    assert savepoint.parent == kept
    assert json.loads((savepoint / "_metadata").read_text())["stopMode"] == "no-drain"
