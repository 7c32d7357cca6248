"""Kubernetes access (kubernetes_asyncio): plain-dict reads and writes of the objects the operator manages."""

from .api import Kube, Obj, Refused
from .connect import api_client

__all__ = ["Kube", "Obj", "Refused", "api_client"]
