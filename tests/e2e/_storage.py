"""Where the end-to-end jobs keep checkpoints, savepoints and output: one S3 bucket per test session.

By default that is the session's moto server on loopback (`testkit.s3`), which pods of the process
kubelet reach because they share this machine's network. Pods of a real cluster cannot reach this
machine's loopback, so `SLUICE_TEST_S3_ENDPOINT` names an S3 endpoint that both they and this machine
reach (kind/run.sh starts a moto server on the kind network's gateway for that).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import s3fs

from testkit.s3 import client_env, client_options

EXTERNAL_ENDPOINT_ENV = "SLUICE_TEST_S3_ENDPOINT"


@dataclass(frozen=True)
class E2EStorage:
    endpoint_url: str
    bucket: str

    @property
    def root(self) -> str:
        """The operator's storage root: `$(SLUICE_STORAGE)` of the example manifests."""
        return f"s3://{self.bucket}/sluice"

    @property
    def allowed_savepoint_prefixes(self) -> list[str]:
        """Savepoint targets the operator allows besides each job's own directories (a bucket that does
        not exist among them, so that a stop can fail in the coordinator rather than in the operator)."""
        return [f"s3://{self.bucket}/elsewhere", f"s3://{self.bucket}-missing"]

    @property
    def env(self) -> dict[str, str]:
        """What every S3 client (operator, coordinator, TaskManagers) needs to find the server."""
        return client_env(self.endpoint_url)

    @property
    def storage_options(self) -> dict[str, Any]:
        """fsspec options for reading what running jobs write: no cached client, no cached listings."""
        return {**client_options(self.endpoint_url), "skip_instance_cache": True, "use_listings_cache": False}

    def filesystem(self) -> s3fs.S3FileSystem:
        return s3fs.S3FileSystem(**self.storage_options)

    def output_uri(self, namespace: str, job: str) -> str:
        """Where the examples write: `$(SLUICE_STORAGE)/output/$(SLUICE_NAMESPACE)/$(SLUICE_JOB_NAME)`."""
        return f"{self.root}/output/{namespace}/{job}"

    def read_json(self, uri: str) -> Any:
        with self.filesystem().open(uri, "rb") as handle:
            return json.loads(handle.read())

    def exists(self, uri: str) -> bool:
        return bool(self.filesystem().exists(uri))


def external_endpoint() -> str | None:
    return os.environ.get(EXTERNAL_ENDPOINT_ENV) or None
