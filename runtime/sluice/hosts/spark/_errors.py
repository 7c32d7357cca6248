"""Errors of the Spark host."""

from __future__ import annotations

from sluice.hosts.base import HostSetupError


class SparkSetupError(HostSetupError):
    """Spark settings or an environment that cannot host the job; the message says how to fix it."""
