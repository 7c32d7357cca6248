"""What one run of a job is deployed with: the resolved directories, its job id and restore point."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from sluice_operator.models import OperatorConfig, StreamJobSpec

from ._common import Owner

# Fields of the spec that do not change what runs: changing them never restarts the job.
_NOT_DEPLOYED = ("state", "savepoints")


def spec_hash(spec: StreamJobSpec) -> str:
    """A short digest of everything in the spec that shapes the running job (restartNonce included).

    Fields at their defaults are left out: a field a newer operator adds (with a default that keeps
    what jobs did before) must not restart every running job when the operator is upgraded.
    """
    deployed = spec.model_dump(mode="json", by_alias=True, exclude=set(_NOT_DEPLOYED), exclude_defaults=True)
    text = json.dumps(deployed, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def deployed_spec_json(spec: StreamJobSpec) -> str:
    """The spec as recorded in status.lastReconciledSpec (stable key order, no defaults dropped)."""
    return json.dumps(spec.model_dump(mode="json", by_alias=True, exclude_none=True), sort_keys=True)


class StorageMissingError(ValueError):
    """The job has nowhere to keep checkpoints or savepoints; the message says how to give it one."""


STORAGE_PLACEHOLDER = "$(SLUICE_STORAGE)"


def missing_storage(spec: StreamJobSpec, config: OperatorConfig) -> str | None:
    """Why the job cannot run for want of storage, or None."""
    if config.storage is not None:
        return None
    unset = [
        field
        for field, value in (
            ("spec.checkpoints.storage", spec.checkpoints.storage),
            ("spec.savepoints.targetDirectory", spec.savepoints.target_directory),
        )
        if not value
    ]
    texts = [*spec.pipeline.args.values(), *spec.env.values()]
    if any(STORAGE_PLACEHOLDER in text for text in texts):
        unset.append(f"{STORAGE_PLACEHOLDER} (used in spec.pipeline.args or spec.env)")
    if not unset:
        return None
    return (
        f"no storage for this job: the operator has no storage root, and {', '.join(unset)} "
        f"{'is' if len(unset) == 1 else 'are'} not set. Give the operator a storage root that every job "
        "pod and the operator reach (Helm value operator.storage, env SLUICE_OPERATOR_STORAGE, e.g. "
        "s3://bucket/sluice), or set spec.checkpoints.storage and spec.savepoints.targetDirectory and "
        f"stop using {STORAGE_PLACEHOLDER}"
    )


def _storage_root(spec: StreamJobSpec, config: OperatorConfig) -> str:
    if config.storage is None:
        raise StorageMissingError(missing_storage(spec, config) or "the operator has no storage root")
    return config.storage


def checkpoint_dir(spec: StreamJobSpec, owner: Owner, config: OperatorConfig) -> str:
    if spec.checkpoints.storage:
        return spec.checkpoints.storage.rstrip("/")
    return f"{_storage_root(spec, config)}/checkpoints/{owner.namespace}/{owner.name}"


def savepoint_dir(spec: StreamJobSpec, owner: Owner, config: OperatorConfig) -> str:
    if spec.savepoints.target_directory:
        return spec.savepoints.target_directory.rstrip("/")
    return f"{_storage_root(spec, config)}/savepoints/{owner.namespace}/{owner.name}"


def expand(text: str, owner: Owner, config: OperatorConfig) -> str:
    """Replace the placeholders a StreamJob may use in pipeline args and env values."""
    for key, value in placeholders(owner, config).items():
        text = text.replace(f"$({key})", value)
    return text


def placeholders(owner: Owner, config: OperatorConfig) -> dict[str, str]:
    values = {"SLUICE_NAMESPACE": owner.namespace, "SLUICE_JOB_NAME": owner.name}
    if config.storage is not None:  # else a job using it is refused (missing_storage)
        values["SLUICE_STORAGE"] = config.storage
    return values


@dataclass(frozen=True)
class Run:
    """One deployment of the job: the inputs of every builder."""

    owner: Owner
    spec: StreamJobSpec
    config: OperatorConfig
    job_id: str
    restore_from: str | None = None

    @property
    def checkpoint_dir(self) -> str:
        return checkpoint_dir(self.spec, self.owner, self.config)

    @property
    def savepoint_dir(self) -> str:
        return savepoint_dir(self.spec, self.owner, self.config)

    @property
    def spec_hash(self) -> str:
        return spec_hash(self.spec)

    def expand(self, text: str) -> str:
        return expand(text, self.owner, self.config)

    def env(self) -> list[dict[str, Any]]:
        """Environment shared by the coordinator and TaskManagers (operator defaults, then the spec's)."""
        values = {**placeholders(self.owner, self.config), **self.config.job_env}
        values.update({k: self.expand(v) for k, v in self.spec.env.items()})
        return [{"name": k, "value": v} for k, v in values.items()]

    def env_from(self) -> list[dict[str, Any]]:
        secret = self.spec.storage_secret or self.config.storage_secret
        if secret is None:
            return []
        # The operator's default secret may not exist in every namespace: then the pod starts without it.
        return [{"secretRef": {"name": secret, "optional": self.spec.storage_secret is None}}]
