"""The committed CRDs are exactly what the models generate, and they are structural."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice_operator.crdgen import TARGET_DIRS, rendered

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("folder", TARGET_DIRS)
def test_committed_crds_match_the_models(folder: str) -> None:
    for name, text in rendered().items():
        path = ROOT / folder / name
        assert path.exists(), f"{path} is missing: run `python -m sluice_operator.crdgen`"
        assert path.read_text() == text, (
            f"{path} drifted from the models: run `python -m sluice_operator.crdgen`"
        )


def _walk(node: Any, where: str) -> list[str]:
    problems: list[str] = []
    if isinstance(node, dict):
        if ("properties" in node or "items" in node or "enum" in node) and "type" not in node:
            problems.append(f"{where}: no type")
        for forbidden in ("$ref", "anyOf", "oneOf", "allOf", "title"):
            if forbidden in node:
                problems.append(f"{where}: {forbidden}")
        if node.get("additionalProperties") is False:
            problems.append(f"{where}: additionalProperties false")
        for key, value in node.get("properties", {}).items():
            problems += _walk(value, f"{where}.{key}")
        if isinstance(node.get("items"), dict):
            problems += _walk(node["items"], f"{where}[]")
        if isinstance(node.get("additionalProperties"), dict):
            problems += _walk(node["additionalProperties"], f"{where}{{}}")
    return problems


@pytest.mark.parametrize("name", sorted(rendered()))
def test_schemas_are_structural(name: str) -> None:
    crd = yaml.safe_load(rendered()[name])
    version = crd["spec"]["versions"][0]
    if crd["spec"]["group"] == "sluice.dev":
        assert version["subresources"] == {"status": {}}
    assert _walk(version["schema"]["openAPIV3Schema"], "") == []


def test_printer_columns() -> None:
    jobs = yaml.safe_load(rendered()["streamjobs.sluice.dev.yaml"])["spec"]["versions"][0]
    names = [c["name"] for c in jobs["additionalPrinterColumns"] if "priority" not in c]
    assert names == ["State", "Lifecycle", "Parallelism", "Last-Checkpoint", "Age"]
    sps = yaml.safe_load(rendered()["savepoints.sluice.dev.yaml"])["spec"]["versions"][0]
    names = [c["name"] for c in sps["additionalPrinterColumns"] if "priority" not in c]
    assert names == ["Job", "Stop", "State", "Path", "Age"]


def test_pod_templates_keep_unknown_fields() -> None:
    spec = yaml.safe_load(rendered()["streamjobs.sluice.dev.yaml"])["spec"]["versions"][0]["schema"][
        "openAPIV3Schema"
    ]["properties"]["spec"]["properties"]
    template = spec["taskManagers"]["properties"]["podTemplate"]
    assert template == {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "description": template["description"],
    }
