"""The inputs of a StreamJob decision besides the observations."""

from __future__ import annotations

from dataclasses import dataclass

from sluice_operator.manifests import Owner
from sluice_operator.models import OperatorConfig, StreamJobSpec, StreamJobStatus


@dataclass(frozen=True)
class JobContext:
    owner: Owner
    generation: int
    spec: StreamJobSpec
    status: StreamJobStatus
    config: OperatorConfig
    now_ms: int
    new_job_id: str  # the id a new run gets, drawn by the caller so that deciding stays pure
