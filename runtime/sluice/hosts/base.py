"""The host interface: the coordinator asks a host for TaskManagers and learns when one is lost."""

from __future__ import annotations

from typing import Protocol

from sluice.transport.secret import TaskManagerLaunch


class HostSetupError(Exception):
    """The host cannot be set up with the given settings or environment; the message says how to fix it."""


class HostUnavailable(Exception):
    """The host could not be started for a reason that may pass by itself (a cluster manager that did
    not answer in time, say): nothing ran and nothing was stored, and the same command may work later.
    Not a HostSetupError: a supervisor (the operator) runs it again rather than give up on the job."""


class TaskManagerHost(Protocol):
    name: str

    def control_bind_host(self) -> str:
        """The address the coordinator's control port listens on and TaskManagers connect to."""

    async def start(self, count: int, launch: TaskManagerLaunch, attempt: int) -> None:
        """Starts `count` TaskManagers for `attempt`; each registers with the coordinator by itself.

        `launch` holds the job's secret: a host hands it to TaskManagers only through a private path
        (standard input, a task closure), never a command line or an environment others can read.
        """

    async def wait_lost(self) -> str:
        """Returns (with a description) when a TaskManager of the current attempt ended unexpectedly."""

    async def stop(self, grace_s: float = 0.0) -> None:
        """Ends every TaskManager of the current attempt; nothing is left running afterwards.

        With a grace period, TaskManagers that were told to shut down get that long to exit by themselves.
        """
