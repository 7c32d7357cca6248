"""The operator's own configuration (environment variables, set by the Helm chart or a test)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from ._base import URI_RE, duration_ms

ENV_STORAGE = "SLUICE_OPERATOR_STORAGE"
ENV_STORAGE_SECRET = "SLUICE_OPERATOR_STORAGE_SECRET"
ENV_JOB_ENV = "SLUICE_OPERATOR_JOB_ENV_"
ENV_RECONCILE_INTERVAL = "SLUICE_OPERATOR_RECONCILE_INTERVAL"
ENV_IMAGE_PULL_POLICY = "SLUICE_OPERATOR_IMAGE_PULL_POLICY"
ENV_ALLOW_PRIVILEGED = "SLUICE_OPERATOR_ALLOW_PRIVILEGED_PODS"
DEFAULT_STORAGE = "file:///var/lib/sluice"


class ConfigError(ValueError):
    """The operator's configuration is wrong; the operator refuses to start and says why."""


@dataclass(frozen=True)
class OperatorConfig:
    """Defaults the operator applies to every StreamJob that leaves them out.

    `storage` is the root under which checkpoints and savepoints of jobs without explicit directories
    go (`<storage>/checkpoints/<namespace>/<name>`), and what `$(SLUICE_STORAGE)` in pipeline args
    means. Tests and clusters point it at their object storage without editing any StreamJob.
    `job_env` is added to the environment of every job pod (e.g. AWS_ENDPOINT_URL of a test S3 server).
    `allow_privileged_pods` lets pod templates and Spark settings escalate (host namespaces, hostPath,
    privileged containers, ...), which the operator otherwise refuses.
    """

    storage: str = DEFAULT_STORAGE
    storage_secret: str | None = None
    job_env: Mapping[str, str] = field(default_factory=dict)
    reconcile_interval_s: float = 5.0
    image_pull_policy: str | None = None
    allow_privileged_pods: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OperatorConfig:
        env = os.environ if environ is None else environ
        storage = env.get(ENV_STORAGE, DEFAULT_STORAGE).rstrip("/")
        if not URI_RE.match(storage):
            raise ConfigError(
                f"{ENV_STORAGE}={storage!r} is not an absolute path or a URI such as s3://bucket/prefix"
            )
        interval = env.get(ENV_RECONCILE_INTERVAL, "5s")
        try:
            interval_s = duration_ms(interval) / 1000
        except ValueError as error:
            raise ConfigError(f"{ENV_RECONCILE_INTERVAL}: {error}") from None
        allow = env.get(ENV_ALLOW_PRIVILEGED, "false").strip().lower()
        if allow not in ("true", "false"):
            raise ConfigError(f"{ENV_ALLOW_PRIVILEGED}={allow!r}: write true or false")
        job_env = {k[len(ENV_JOB_ENV) :]: v for k, v in env.items() if k.startswith(ENV_JOB_ENV) and v}
        return cls(
            storage=storage,
            storage_secret=env.get(ENV_STORAGE_SECRET) or None,
            job_env=job_env,
            reconcile_interval_s=max(interval_s, 0.2),
            image_pull_policy=env.get(ENV_IMAGE_PULL_POLICY) or None,
            allow_privileged_pods=allow == "true",
        )
