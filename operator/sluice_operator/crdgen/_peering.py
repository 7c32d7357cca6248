"""CRDs of kopf's peering objects, which the operator's leader election uses (`--peering NAME`)."""

from __future__ import annotations

from typing import Any


def _peering(kind: str, plural: str, scope: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.kopf.dev", "labels": {"app.kubernetes.io/part-of": "sluice"}},
        "spec": {
            "group": "kopf.dev",
            "scope": scope,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    # Kopf writes its peers' heartbeats into .status with ordinary patches.
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                            },
                        }
                    },
                }
            ],
        },
    }


def peering_crds() -> dict[str, dict[str, Any]]:
    return {
        "kopfpeerings.kopf.dev.yaml": _peering("KopfPeering", "kopfpeerings", "Namespaced"),
        "clusterkopfpeerings.kopf.dev.yaml": _peering("ClusterKopfPeering", "clusterkopfpeerings", "Cluster"),
    }
