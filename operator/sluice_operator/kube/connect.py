"""Connecting to the API server: in a pod through its service account, elsewhere through a kubeconfig."""

from __future__ import annotations

import os

from kubernetes_asyncio import client, config


async def api_client(kubeconfig: str | None = None) -> client.ApiClient:
    """An ApiClient for the cluster the operator manages.

    `kubeconfig` (or $KUBECONFIG) wins; inside a pod without one, the mounted service account is used.
    """
    path = kubeconfig or os.environ.get("KUBECONFIG")
    configuration = client.Configuration()
    if path:
        await config.load_kube_config(config_file=path, client_configuration=configuration)
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        await config.load_kube_config(client_configuration=configuration)
    return client.ApiClient(configuration)
