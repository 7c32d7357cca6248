"""The life of one pod on the process kubelet's node, from its volumes to its deletion."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._api import ApiError, KubeApi
from ._container import ContainerProcess, Exit, now
from ._env import ConfigError, container_env, expand
from ._images import ImageError, ImageSpec, container_argv, resolve_image
from ._ips import IpPool
from ._mountpoints import MountPoints
from ._objects import PodObjects
from ._status import Conditions, ContainerRecord, build_status
from ._volumes import Mount, container_mounts, prepare_volumes

JsonDict = dict[str, Any]
_RETRY_SECONDS = 2.0
_DEFAULT_GRACE_SECONDS = 30


@dataclass
class Runtime:
    """What every pod worker shares: the API, the node, and how to turn images into processes."""

    api: KubeApi
    node_name: str
    host_ip: str
    state_dir: Path
    images: Mapping[str, ImageSpec]
    ips: IpPool
    base_env: Mapping[str, str]
    service_env: Mapping[str, str]
    node_allocatable: Mapping[str, str]
    backoff_base: float
    backoff_max: float
    log: logging.Logger
    mount_points: MountPoints


class PodWorker:
    def __init__(self, rt: Runtime, pod: JsonDict) -> None:
        self._rt = rt
        self.pod = pod
        meta, spec = pod["metadata"], pod["spec"]
        self.uid, self.name, self.namespace = meta["uid"], meta["name"], meta["namespace"]
        self._path = f"/api/v1/namespaces/{self.namespace}/pods/{self.name}"
        self._dir = rt.state_dir / "pods" / f"{self.namespace}_{self.name}_{self.uid}"
        self._objects = PodObjects(rt.api, pod)
        self._deleting = asyncio.Event()
        self._gone = False
        self._running: dict[str, tuple[ContainerProcess, asyncio.Future[Exit]]] = {}
        first_wait = "PodInitializing" if spec.get("initContainers") else "ContainerCreating"
        self._init = [ContainerRecord(c["name"], c["image"]) for c in spec.get("initContainers") or []]
        self._main = [ContainerRecord(c["name"], c["image"]) for c in spec["containers"]]
        for record in self._main:
            record.waiting(first_wait)
        self._conditions = Conditions()
        self._started = False
        self._pod_ip: str | None = None
        self._volumes: dict[str, Path] = {}
        self._start_time = now()
        self._message: str | None = None
        # Status patches are built and sent one at a time, so a stale status never lands last.
        self._publish_lock = asyncio.Lock()
        self._terminal = pod.get("status", {}).get("phase") in ("Succeeded", "Failed")
        self.task = asyncio.create_task(self._run(), name=f"pod {self.namespace}/{self.name}")

    # ---- events from the kubelet's watch -----------------------------------------------------------

    def update(self, pod: JsonDict) -> None:
        self.pod = pod
        if pod["metadata"].get("deletionTimestamp"):
            self._deleting.set()

    def gone(self) -> None:
        """The pod object no longer exists: stop its processes without reporting anything."""
        self._gone = True
        self._deleting.set()

    async def shutdown(self) -> None:
        """The kubelet stops: end the processes quickly, leave the pod objects as they are."""
        self._gone = True
        self.task.cancel()
        await asyncio.gather(*(process.stop(2) for process, _ in self._running.values()))
        self._rt.mount_points.release(self.uid)

    # ---- the pod's life ----------------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            if not self._terminal and await self._setup():
                await self._run_containers(self._init, self.pod["spec"].get("initContainers") or [], True)
                if all(record.done and record.exit_code == 0 for record in self._init):
                    await self._run_containers(self._main, self.pod["spec"]["containers"], False)
            await self._deleting.wait()
            await self._terminate()
        except Exception:
            self._rt.log.exception("pod %s/%s: worker failed", self.namespace, self.name)
            raise

    async def _setup(self) -> bool:
        spec = self.pod["spec"]
        host_network = bool(spec.get("hostNetwork"))
        self._pod_ip = self._rt.host_ip if host_network else self._rt.ips.allocate()
        hostname = (spec.get("hostname") or self.name)[:63]
        (self._dir / "logs").mkdir(parents=True, exist_ok=True)
        hosts = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        if subdomain := spec.get("subdomain"):
            hosts.append(
                f"{self._pod_ip}\t{hostname}.{subdomain}.{self.namespace}.svc.cluster.local\t{hostname}"
            )
        else:
            hosts.append(f"{self._pod_ip}\t{hostname}")
        hosts += [
            f"{alias['ip']}\t{' '.join(alias.get('hostnames', []))}"
            for alias in spec.get("hostAliases") or []
        ]
        (self._dir / "hosts").write_text("\n".join(hosts) + "\n")
        while not self._deleting.is_set():
            try:
                self._volumes = await prepare_volumes(
                    self.pod,
                    self._dir / "volumes",
                    self._objects,
                    self._objects,
                    pod_ip=self._pod_ip,
                    host_ip=self._rt.host_ip,
                    node_allocatable=self._rt.node_allocatable,
                )
            except ConfigError as error:
                self._message = str(error)
                self._rt.log.warning("pod %s/%s: %s", self.namespace, self.name, error)
                await self._publish()
                if await self._sleep(_RETRY_SECONDS):
                    return False
                continue
            self._message = None
            self._started = True
            await self._publish()
            return True
        return False

    async def _run_containers(
        self, records: list[ContainerRecord], specs: list[JsonDict], init: bool
    ) -> None:
        if init:  # one after the other, each to success
            for record, container in zip(records, specs, strict=True):
                await self._container_loop(record, container, init=True)
                if not (record.done and record.exit_code == 0):
                    return
            return
        await asyncio.gather(
            *(self._container_loop(r, c, init=False) for r, c in zip(records, specs, strict=True))
        )

    async def _container_loop(self, record: ContainerRecord, container: JsonDict, init: bool) -> None:
        policy = self.pod["spec"].get("restartPolicy", "Always")
        backoff = self._rt.backoff_base
        while not self._deleting.is_set():
            try:
                process = await self._launch(record, container)
            except (ConfigError, ImageError) as error:
                reason = (
                    "CreateContainerConfigError" if isinstance(error, ConfigError) else "CreateContainerError"
                )
                record.waiting(reason, str(error))
                await self._publish()
                if await self._sleep(_RETRY_SECONDS):
                    return
                continue
            record.container_id = process.container_id
            record.state = {"running": {"startedAt": process.started_at}}
            await self._publish()
            started = time.monotonic()
            result = await self._wait_exit(record.name, process)
            if result is None:  # the pod is being deleted; _terminate stops the process
                return
            record.state = {"terminated": result.terminated(process.container_id)}
            failed = result.exit_code != 0
            restart = (
                failed and policy != "Never"
                if init
                else policy == "Always" or (policy == "OnFailure" and failed)
            )
            if not restart:
                record.done = True
                if not init and all(r.done for r in self._main):
                    # Nothing of the pod runs any more: free its mount points before its terminal phase
                    # is published, as a real kubelet tears down a terminated pod's volumes. The API
                    # server deletes a terminated pod at once (no grace period), so `kubectl delete`
                    # returns before this kubelet even hears of the deletion.
                    self._rt.mount_points.release(self.uid)
                await self._publish()
                return
            if time.monotonic() - started > 2 * self._rt.backoff_max:
                backoff = self._rt.backoff_base  # it ran long enough to forget earlier crashes
            record.last_state = record.state
            record.waiting(
                "CrashLoopBackOff",
                f"back-off {backoff:g}s restarting failed container={record.name} "
                f"pod={self.name}_{self.namespace}({self.uid})",
            )
            await self._publish()
            if await self._sleep(backoff):
                return
            backoff = min(backoff * 2, self._rt.backoff_max)
            record.restart_count += 1

    async def _launch(self, record: ContainerRecord, container: JsonDict) -> ContainerProcess:
        assert self._pod_ip is not None
        spec = self.pod["spec"]
        image = resolve_image(self._rt.images, container["image"])
        hostname = None if spec.get("hostNetwork") else (spec.get("hostname") or self.name)[:63]
        base = {
            **self._rt.base_env,
            **image.env,
            **self._rt.service_env,
            "HOSTNAME": hostname or socket.gethostname(),
        }
        env = await container_env(
            self.pod,
            container,
            self._objects,
            base,
            pod_ip=self._pod_ip,
            host_ip=self._rt.host_ip,
            node_allocatable=self._rt.node_allocatable,
        )
        command = [expand(part, env) for part in container.get("command") or []]
        args = [expand(part, env) for part in container.get("args") or []]
        argv = container_argv(image, command, args)
        mounts = container_mounts(self.pod, container, self._volumes)
        if hostname is not None:
            mounts.append(Mount(str(self._dir / "hosts"), "/etc/hosts", read_only=False))
        cwd = container.get("workingDir") or image.workdir or "/"
        self._rt.mount_points.acquire(self.uid, mounts, cwd)
        log_path = self._dir / "logs" / record.name / f"{record.restart_count}.log"
        process = ContainerProcess(argv, env, cwd=cwd, hostname=hostname, mounts=mounts, log_path=log_path)
        await process.start()
        self._rt.log.info(
            "pod %s/%s: container %s started as pid %d: %s",
            self.namespace,
            self.name,
            record.name,
            process.pid,
            argv,
        )
        return process

    async def _wait_exit(self, name: str, process: ContainerProcess) -> Exit | None:
        exit_future = asyncio.ensure_future(process.wait())
        self._running[name] = (process, exit_future)
        deleting = asyncio.ensure_future(self._deleting.wait())
        await asyncio.wait({exit_future, deleting}, return_when=asyncio.FIRST_COMPLETED)
        deleting.cancel()
        if not exit_future.done():
            return None
        del self._running[name]
        result = exit_future.result()
        self._rt.log.info(
            "pod %s/%s: container %s exited with %d", self.namespace, self.name, name, result.exit_code
        )
        return result

    async def _sleep(self, seconds: float) -> bool:
        """Sleep, waking early when the pod is being deleted; returns whether it is."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._deleting.wait(), timeout=seconds)
        return self._deleting.is_set()

    async def _terminate(self) -> None:
        meta = self.pod["metadata"]
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = self.pod["spec"].get("terminationGracePeriodSeconds", _DEFAULT_GRACE_SECONDS)
        running = list(self._running.items())
        await asyncio.gather(*(process.stop(float(grace)) for _, (process, _) in running))
        records = {record.name: record for record in [*self._init, *self._main]}
        for name, (process, exit_future) in running:
            records[name].state = {"terminated": (await exit_future).terminated(process.container_id)}
            records[name].done = True
        self._running.clear()
        self._rt.mount_points.release(self.uid)
        if self._volumes:
            shutil.rmtree(self._dir / "volumes", ignore_errors=True)
        if self._gone:
            return
        if not self._terminal:
            codes = [record.exit_code for record in self._main]
            phase = "Succeeded" if codes and all(code == 0 for code in codes) else "Failed"
            await self._publish(terminal_phase=phase)
        options = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": self.uid},
        }
        try:
            await self._rt.api.delete(self._path, options)
        except ApiError as error:
            if error.status not in (404, 409):
                raise
        self._rt.log.info("pod %s/%s: deleted", self.namespace, self.name)

    async def _publish(self, terminal_phase: str | None = None) -> None:
        async with self._publish_lock:
            await self._publish_locked(terminal_phase)

    async def _publish_locked(self, terminal_phase: str | None) -> None:
        if self._gone or self._terminal:
            return
        status = build_status(
            init=self._init,
            main=self._main,
            conditions=self._conditions,
            started=self._started,
            pod_ip=self._pod_ip,
            host_ip=self._rt.host_ip,
            start_time=self._start_time,
            terminal_phase=terminal_phase,
            message=self._message,
        )
        try:
            await self._rt.api.merge_patch(self._path + "/status", {"status": status})
        except ApiError as error:
            if error.status != 404:
                self._rt.log.warning("pod %s/%s: status update failed: %s", self.namespace, self.name, error)
        if status["phase"] in ("Succeeded", "Failed"):
            self._terminal = True
