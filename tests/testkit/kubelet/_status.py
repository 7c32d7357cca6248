"""The pod status the process kubelet reports: container states, phase and conditions.

The rules follow the kubelet's: a pod is Pending until its containers have started, Running while any
container runs or is going to be restarted, and Succeeded or Failed once every container has
terminated for good (all exit codes 0, or not). Without probes a running container is ready.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._container import now

JsonDict = dict[str, Any]


@dataclass
class ContainerRecord:
    name: str
    image: str
    state: JsonDict = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    last_state: JsonDict = field(default_factory=dict)
    restart_count: int = 0
    container_id: str | None = None
    # Set once the container has terminated and its restart policy says it stays so.
    done: bool = False

    @property
    def running(self) -> bool:
        return "running" in self.state

    @property
    def exit_code(self) -> int | None:
        terminated = self.state.get("terminated")
        return None if terminated is None else int(terminated["exitCode"])

    def waiting(self, reason: str, message: str | None = None) -> None:
        self.state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}

    def to_status(self) -> JsonDict:
        status: JsonDict = {
            "name": self.name,
            "image": self.image,
            "imageID": "",
            "ready": self.running,
            "started": self.running,
            "restartCount": self.restart_count,
            "state": self.state,
            "lastState": self.last_state,
        }
        if self.container_id:
            status["containerID"] = self.container_id
        return status


class Conditions:
    """Pod conditions that remember when their status last changed."""

    def __init__(self) -> None:
        self._items: dict[str, JsonDict] = {}

    def set(self, kind: str, value: bool, reason: str | None = None, message: str | None = None) -> None:
        status = "True" if value else "False"
        previous = self._items.get(kind)
        since = previous["lastTransitionTime"] if previous and previous["status"] == status else now()
        item: JsonDict = {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": since}
        if reason:
            item["reason"] = reason
        if message:
            item["message"] = message
        self._items[kind] = item

    def to_status(self) -> list[JsonDict]:
        return list(self._items.values())


def pod_phase(init: list[ContainerRecord], main: list[ContainerRecord], started: bool) -> str:
    if any(record.done and record.exit_code != 0 for record in init):
        return "Failed"
    if not started or any(not record.done for record in init):
        return "Pending"
    if main and all(record.done for record in main):
        return "Succeeded" if all(record.exit_code == 0 for record in main) else "Failed"
    if any(record.running or record.last_state or "terminated" in record.state for record in main):
        return "Running"
    return "Pending"


def build_status(
    *,
    init: list[ContainerRecord],
    main: list[ContainerRecord],
    conditions: Conditions,
    started: bool,
    pod_ip: str | None,
    host_ip: str,
    start_time: str,
    terminal_phase: str | None = None,
    message: str | None = None,
) -> JsonDict:
    phase = terminal_phase or pod_phase(init, main, started)
    initialized = all(record.done and record.exit_code == 0 for record in init)
    ready = phase == "Running" and all(record.running for record in main)
    conditions.set("PodScheduled", True)
    conditions.set("PodReadyToStartContainers", started)
    conditions.set("Initialized", initialized, None if initialized else "ContainersNotInitialized")
    if phase in ("Succeeded", "Failed"):
        conditions.set("ContainersReady", False, "PodCompleted")
        conditions.set("Ready", False, "PodCompleted")
    else:
        not_ready = [record.name for record in main if not record.running]
        why = f"containers with unready status: [{' '.join(not_ready)}]" if not_ready else None
        conditions.set("ContainersReady", ready, None if ready else "ContainersNotReady", why)
        conditions.set("Ready", ready, None if ready else "ContainersNotReady", why)
    status: JsonDict = {
        "phase": phase,
        "conditions": conditions.to_status(),
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": start_time,
        "message": message,
        "initContainerStatuses": [record.to_status() for record in init] or None,
        "containerStatuses": [record.to_status() for record in main],
    }
    if pod_ip:
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    return status
