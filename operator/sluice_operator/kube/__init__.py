"""Kubernetes access (kubernetes_asyncio): plain-dict reads and writes of the objects the operator manages."""

from .api import Kube, Obj
from .connect import api_client

__all__ = ["Kube", "Obj", "api_client"]
