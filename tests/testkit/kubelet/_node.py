"""The process kubelet's Node: registration, status, and the heartbeats that keep it Ready.

The node lifecycle controller of kube-controller-manager marks a node NotReady when its Lease in
kube-node-lease is not renewed, and then taints it NoExecute, which evicts the pods. Renewing the
Lease and the Ready condition every few seconds keeps the node, and so the pods, alive.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import platform
from collections.abc import Mapping
from typing import Any

from ._api import ApiError, KubeApi

JsonDict = dict[str, Any]
HEARTBEAT_SECONDS = 10
_LEASE_SECONDS = 40


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def node_allocatable() -> dict[str, str]:
    memory_kib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 1024
    return {
        "cpu": str(os.cpu_count() or 1),
        "memory": f"{memory_kib}Ki",
        "pods": "110",
        "ephemeral-storage": "100Gi",
    }


class Node:
    def __init__(
        self, api: KubeApi, name: str, host_ip: str, labels: Mapping[str, str], log: logging.Logger
    ) -> None:
        self._api, self.name, self._host_ip, self._log = api, name, host_ip, log
        self.labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": {"x86_64": "amd64", "aarch64": "arm64"}.get(
                platform.machine(), platform.machine()
            ),
            "sluice.dev/process-kubelet": "true",
            **labels,
        }
        self.allocatable = node_allocatable()
        # The conditions never change while the kubelet lives, so they have one transition time.
        self._since = _now()

    async def register(self) -> None:
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.name, "labels": self.labels}}
        try:
            await self._api.post("/api/v1/nodes", body)
        except ApiError as error:
            if error.status != 409:
                raise
            await self._api.merge_patch(f"/api/v1/nodes/{self.name}", {"metadata": {"labels": self.labels}})
        await self._report_status()
        await self._renew_lease()

    async def heartbeat_forever(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            try:
                await self._renew_lease()
                await self._report_status()
            except Exception as error:  # a missed beat is not fatal; the next one may succeed
                self._log.warning("node heartbeat failed: %s", error)

    async def _report_status(self) -> None:
        now = _now()

        def condition(kind: str, ok: bool, reason: str, message: str) -> JsonDict:
            return {
                "type": kind,
                "status": "True" if ok == (kind == "Ready") else "False",
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": self._since,
            }

        status = {
            "capacity": self.allocatable,
            "allocatable": self.allocatable,
            "addresses": [
                {"type": "InternalIP", "address": self._host_ip},
                {"type": "Hostname", "address": self.name},
            ],
            "conditions": [
                condition("MemoryPressure", True, "KubeletHasSufficientMemory", "not emulated"),
                condition("DiskPressure", True, "KubeletHasNoDiskPressure", "not emulated"),
                condition("PIDPressure", True, "KubeletHasSufficientPID", "not emulated"),
                condition("Ready", True, "KubeletReady", "process kubelet is posting ready status"),
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
            "nodeInfo": {
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
                "kernelVersion": platform.release(),
                "osImage": "process kubelet (host processes)",
                "containerRuntimeVersion": "process://0",
                "kubeletVersion": "v0.0.0-process",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": self.labels["kubernetes.io/arch"],
            },
        }
        await self._api.merge_patch(f"/api/v1/nodes/{self.name}/status", {"status": status})

    async def _renew_lease(self) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{self.name}"
        spec = {
            "holderIdentity": self.name,
            "leaseDurationSeconds": _LEASE_SECONDS,
            "renewTime": _micro_now(),
        }
        try:
            await self._api.merge_patch(path, {"spec": spec})
        except ApiError as error:
            if error.status != 404:
                raise
            await self._api.post(
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": self.name},
                    "spec": spec,
                },
            )
