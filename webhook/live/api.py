"""The API server connection every live part shares: the client, and raw-response error checks."""

from __future__ import annotations

import aiohttp
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException


async def api_client(kubeconfig: str | None) -> client.ApiClient:
    """From a kubeconfig file, or the in-cluster service account when none is given."""
    configuration = client.Configuration()
    if kubeconfig:
        await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    else:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    return client.ApiClient(configuration)


async def checked(response: aiohttp.ClientResponse) -> aiohttp.ClientResponse:
    """Raw (unpreloaded) responses do not raise on errors: do it here, with the server's words."""
    if not 200 <= response.status <= 299:
        text = (await response.read()).decode(errors="replace")[:500]
        response.release()
        raise ApiException(status=response.status, reason=text)
    return response
