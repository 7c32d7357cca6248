"""Thin kopf handlers: they only wire triggers to the services and post events and metrics.

Importing this package registers the handlers with kopf's default registry.
"""

from . import savepoints, setup, streamjobs

__all__ = ["savepoints", "setup", "streamjobs"]
