"""The host interface: the coordinator asks a host for TaskManagers and learns when one is lost."""

from __future__ import annotations

from typing import Protocol


class HostSetupError(Exception):
    """The host cannot be set up with the given settings or environment; the message says how to fix it."""


class TaskManagerHost(Protocol):
    name: str

    def control_bind_host(self) -> str:
        """The address the coordinator's control port listens on and TaskManagers connect to."""

    async def start(self, count: int, coordinator_address: str, attempt: int) -> None:
        """Starts `count` TaskManagers for `attempt`; each registers with the coordinator by itself."""

    async def wait_lost(self) -> str:
        """Returns (with a description) when a TaskManager of the current attempt ended unexpectedly."""

    async def stop(self, grace_s: float = 0.0) -> None:
        """Ends every TaskManager of the current attempt; nothing is left running afterwards.

        With a grace period, TaskManagers that were told to shut down get that long to exit by themselves.
        """
