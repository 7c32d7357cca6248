"""The example manifests that the end-to-end tests apply unchanged are valid for the operator."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from sluice_operator import manifests as m
from sluice_operator.models import OperatorConfig
from sluice_operator.services.observe.validate import savepoint_spec, streamjob_spec

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "k8s"


def test_streamjobs_validate_and_take_storage_from_the_operator() -> None:
    config = OperatorConfig(storage="s3://test-bucket/root")
    for name in ("streamjob.yaml", "streamjob-bounded.yaml"):
        doc = yaml.safe_load((EXAMPLES / name).read_text())
        assert doc["apiVersion"] == "sluice.dev/v1alpha1" and doc["kind"] == "StreamJob"
        spec = streamjob_spec(doc["spec"])
        owner = m.Owner(name=doc["metadata"]["name"], namespace="e2e", uid="u")
        run = m.Run(owner=owner, spec=spec, config=config, job_id="j")
        args = m.sluice_run_args(run)
        assert f"out=s3://test-bucket/root/output/e2e/{owner.name}" in args
        assert run.checkpoint_dir == f"s3://test-bucket/root/checkpoints/e2e/{owner.name}"


def test_savepoint_example() -> None:
    doc = yaml.safe_load((EXAMPLES / "savepoint.yaml").read_text())
    spec = savepoint_spec(doc["spec"])
    assert (spec.job_name, spec.stop.value) == ("unbounded-counts", "none")


def test_kafka_example_passes_the_args_its_pipeline_reads() -> None:
    doc = yaml.safe_load((EXAMPLES / "kafka-streamjob.yaml").read_text())
    spec = streamjob_spec(doc["spec"])
    assert spec.pipeline.file is not None
    pipeline = (EXAMPLES.parents[1] / spec.pipeline.file).read_text()
    read = set(re.findall(r"""env\.args(?:\.get\(|\[)["'](\w+)["']""", pipeline))
    assert read == {"bootstrap", "input", "output", "group", "bounded"}, read
    assert set(spec.pipeline.args) == read - {"bounded"}  # unbounded: it runs until stopped
    owner = m.Owner(name=doc["metadata"]["name"], namespace="e2e", uid="u")
    run = m.Run(owner=owner, spec=spec, config=OperatorConfig(storage="s3://b/r"), job_id="j")
    assert "group=e2e-kafka-totals" in m.sluice_run_args(run)  # one consumer group per job
