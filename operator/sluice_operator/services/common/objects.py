"""Typed views of the Kubernetes objects the operator reads, each parsed once where it is read.

The API server hands objects over as JSON dicts. Every field the operator reads of one is taken out
here, in one place, so that what a missing or wrongly typed field means is decided once: the rest of
the operator reads attributes. Pods and Savepoints seen by a reconcile are further read into
`observed.PodView` and `observed.SavepointView`, from the `ObjectMeta` parsed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sluice_operator import manifests as m
from sluice_operator.models import StreamJobStatus

from ._time import millis


@dataclass(frozen=True)
class ObjectMeta:
    """`metadata` as the operator reads it of any object; a field that is missing reads as empty."""

    name: str
    namespace: str = ""  # a cluster-scoped object has none
    uid: str | None = None
    generation: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    owner_uids: tuple[object, ...] = ()  # the `uid` of each ownerReference
    created: str = ""  # creationTimestamp, RFC 3339 (sorts in time order)
    deletion_ms: int | None = None  # deletionTimestamp, when it parses as one
    deleting: bool = False  # has a deletionTimestamp: a finalizer is all that keeps it
    finalizers: tuple[str, ...] = ()

    @staticmethod
    def parse(obj: Mapping[str, Any]) -> ObjectMeta:
        meta = obj.get("metadata") or {}
        deletion = meta.get("deletionTimestamp")
        return ObjectMeta(
            name=str(meta.get("name")),
            namespace=str(meta.get("namespace") or ""),
            uid=meta.get("uid"),
            generation=int(meta.get("generation") or 0),
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            owner_uids=tuple(ref.get("uid") for ref in meta.get("ownerReferences") or []),
            created=str(meta.get("creationTimestamp") or ""),
            deletion_ms=millis(deletion),
            deleting=bool(deletion),
            finalizers=tuple(meta.get("finalizers") or []),
        )

    def owned_by(self, uid: str | None) -> bool:
        return uid is not None and uid in self.owner_uids


@dataclass(frozen=True)
class StreamJobObject:
    """A StreamJob as read from the API server: who it is, its spec as sent, and its recorded status."""

    owner: m.Owner
    meta: ObjectMeta
    spec: object  # as sent: validated into a StreamJobSpec by `observe.validate`, which names what is wrong
    status: StreamJobStatus  # one that does not parse counts as none (the operator writes it anew)
    recorded: dict[str, Any]  # the status as stored, what a status patch is the difference from

    @staticmethod
    def parse(job: Mapping[str, Any]) -> StreamJobObject:
        """From the object as listed; its name, namespace and uid are required (the API server sets them)."""
        meta = job["metadata"]
        raw_status = job.get("status") or {}
        try:
            status = StreamJobStatus.model_validate(raw_status)
        except ValueError:
            status = StreamJobStatus()
        return StreamJobObject(
            owner=m.Owner(name=meta["name"], namespace=meta["namespace"], uid=meta["uid"]),
            meta=ObjectMeta.parse(job),
            spec=job.get("spec"),
            status=status,
            recorded=dict(raw_status),
        )


__all__ = ["ObjectMeta", "StreamJobObject"]
