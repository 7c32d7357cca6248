"""docs/reference/openapi.yaml describes the routes the coordinator serves, no more and no fewer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sluice.coordinator._rest_auth import RestAuth
from sluice.coordinator._rest_input import SavepointTargets
from sluice.coordinator.rest import RestApi

OPENAPI = Path(__file__).resolve().parents[3] / "docs" / "reference" / "openapi.yaml"


def test_the_document_names_every_route_and_only_those() -> None:
    api = RestApi(None, RestAuth("t", protect_reads=False), SavepointTargets([]))  # type: ignore[arg-type]
    served = {
        (route.method, route.resource.canonical.replace("{trigger_id}", "{triggerId}"))
        for route in api.app.router.routes()
        if route.method != "HEAD" and route.resource is not None
    }
    document: dict[str, Any] = yaml.safe_load(OPENAPI.read_text())
    described = {(method.upper(), path) for path, item in document["paths"].items() for method in item}
    assert described == served


def test_every_mutation_requires_the_token_and_health_never_does() -> None:
    document: dict[str, Any] = yaml.safe_load(OPENAPI.read_text())
    assert document["security"] == [{"bearer": []}]
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method != "get":
                assert "security" not in operation, f"{method} {path} inherits the required token"
                assert {"401", "403"} <= set(operation["responses"]), f"{method} {path}"
    assert document["paths"]["/v1/health"]["get"]["security"] == []
