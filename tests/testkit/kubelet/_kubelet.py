"""The process kubelet's control loop: watch all pods, bind the schedulable ones, run the node's."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from ._api import ApiError, KubeApi
from ._images import ImageSpec
from ._ips import IpPool
from ._mountpoints import MountPoints
from ._node import Node
from ._pod import PodWorker, Runtime

JsonDict = dict[str, Any]
HOST_IP = "127.0.0.1"
# What the "image" sees of the host's environment; everything else comes from the pod spec.
_PASSED_THROUGH = ("PATH", "LANG", "LC_ALL", "TZ", "JAVA_HOME", "HOME", "TMPDIR")


def _base_env() -> dict[str, str]:
    env = {name: os.environ[name] for name in _PASSED_THROUGH if name in os.environ}
    # The kubelet runs on the project's interpreter; its scripts directory plays the image's PATH.
    scripts = str(Path(sys.executable).parent)
    env["PATH"] = scripts + os.pathsep + env.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env


def _service_env(server: str) -> dict[str, str]:
    """The variables in-cluster clients use to find the API server; here it is on loopback."""
    url = urlsplit(server)
    host, port = url.hostname or HOST_IP, str(url.port or 443)
    return {
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": port,
        "KUBERNETES_SERVICE_PORT_HTTPS": port,
        "KUBERNETES_PORT": f"tcp://{host}:{port}",
        f"KUBERNETES_PORT_{port}_TCP": f"tcp://{host}:{port}",
        f"KUBERNETES_PORT_{port}_TCP_PROTO": "tcp",
        f"KUBERNETES_PORT_{port}_TCP_PORT": port,
        f"KUBERNETES_PORT_{port}_TCP_ADDR": host,
    }


class Kubelet:
    def __init__(
        self,
        api: KubeApi,
        node_name: str,
        *,
        state_dir: Path,
        images: Mapping[str, ImageSpec],
        pod_cidr: str,
        node_labels: Mapping[str, str],
        backoff: tuple[float, float],
        log: logging.Logger,
    ) -> None:
        self._api, self._log = api, log
        self._node = Node(api, node_name, HOST_IP, node_labels, log)
        self._rt = Runtime(
            api=api,
            node_name=node_name,
            host_ip=HOST_IP,
            state_dir=state_dir,
            images=images,
            ips=IpPool(pod_cidr),
            base_env=_base_env(),
            service_env=_service_env(api.server),
            node_allocatable=self._node.allocatable,
            backoff_base=backoff[0],
            backoff_max=backoff[1],
            log=log,
            mount_points=MountPoints(log),
        )
        self._workers: dict[str, PodWorker] = {}
        self._unschedulable_reported: set[str] = set()

    async def run(self, on_ready: Callable[[], None]) -> None:
        await self._node.register()
        heartbeat = asyncio.create_task(self._node.heartbeat_forever())
        try:
            await self._list_and_watch(on_ready)
        finally:
            heartbeat.cancel()

    async def shutdown(self) -> None:
        await asyncio.gather(
            *(worker.shutdown() for worker in self._workers.values()), return_exceptions=True
        )

    async def _list_and_watch(self, on_ready: Callable[[], None]) -> None:
        ready = False
        while True:
            try:
                listing = await self._api.get("/api/v1/pods")
                version = listing["metadata"]["resourceVersion"]
                await self._reconcile(listing["items"])
                if not ready:
                    on_ready()
                    ready = True
                while True:  # re-watch from the last version until the server says it is too old
                    async for event in self._api.watch("/api/v1/pods", version):
                        obj = event["object"]
                        if event["type"] == "ERROR":
                            raise ApiError("WATCH", "/api/v1/pods", obj.get("code", 500), str(obj))
                        version = obj["metadata"]["resourceVersion"]
                        if event["type"] != "BOOKMARK":
                            await self._handle(event["type"], obj)
            except (ApiError, aiohttp.ClientError, TimeoutError) as error:
                self._log.info("pod watch restarts with a new list: %s", error)
                await asyncio.sleep(1)

    async def _reconcile(self, pods: list[JsonDict]) -> None:
        present = {pod["metadata"]["uid"] for pod in pods}
        for uid in list(self._workers):
            if uid not in present:
                self._workers.pop(uid).gone()
        for pod in pods:
            await self._handle("MODIFIED", pod)

    async def _handle(self, kind: str, pod: JsonDict) -> None:
        uid = pod["metadata"]["uid"]
        if kind == "DELETED":
            if worker := self._workers.pop(uid, None):
                worker.gone()
            return
        node = pod["spec"].get("nodeName")
        if not node:
            await self._bind(pod)
        elif node == self._node.name:
            if uid in self._workers:
                self._workers[uid].update(pod)
            else:
                self._workers[uid] = worker = PodWorker(self._rt, pod)
                worker.update(pod)

    async def _bind(self, pod: JsonDict) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        if spec.get("schedulerName", "default-scheduler") != "default-scheduler" or spec.get(
            "schedulingGates"
        ):
            return
        if meta.get("deletionTimestamp") or pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            return
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        selector = spec.get("nodeSelector") or {}
        mismatched = {k: v for k, v in selector.items() if self._node.labels.get(k) != v}
        if mismatched:
            if meta["uid"] not in self._unschedulable_reported:
                self._unschedulable_reported.add(meta["uid"])
                condition = {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": f"0/1 nodes are available: node selector {mismatched} does not match "
                    f"process kubelet node {self._node.name}",
                }
                await self._api.merge_patch(path + "/status", {"status": {"conditions": [condition]}})
            return
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "uid": meta["uid"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": self._node.name},
        }
        try:
            await self._api.post(path + "/binding", binding)
        except ApiError as error:
            if error.status not in (404, 409):  # gone, or bound meanwhile: the watch tells us
                raise
        self._log.info("pod %s/%s: bound to %s", meta["namespace"], meta["name"], self._node.name)
