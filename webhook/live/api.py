"""The API server connection every live part shares: the client, raw-response error checks, and
what a failed call means to a writer (``transient``: retried with backoff; ``retry_after``)."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
import orjson
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


async def api_client_from(kubeconfig: Mapping[str, Any]) -> client.ApiClient:
    """From a kubeconfig's content (a MultiKueue worker's, read from its Secret): its current context."""
    configuration = client.Configuration()
    await config.load_kube_config_from_dict(dict(kubeconfig), client_configuration=configuration)
    return client.ApiClient(configuration)


async def checked(response: aiohttp.ClientResponse) -> aiohttp.ClientResponse:
    """Raw (unpreloaded) responses do not raise on errors: do it here, with the server's words."""
    if not 200 <= response.status <= 299:
        text = (await response.read()).decode(errors="replace")[:500]
        response.release()
        exc = ApiException(status=response.status, reason=text)
        exc.headers = response.headers  # a writer honours Retry-After (priority and fairness 429s)
        raise exc
    return response


async def call_json(
    api: client.ApiClient, method: str, path: str, body: Any = None, timeout: float = 10.0
) -> dict[str, Any]:
    """One JSON request (GET, POST, ...); the decoded answer, or ApiException with the server's
    status, words and headers."""
    response = await api.call_api(
        path,
        method,
        body=body,
        header_params={"Accept": "application/json", "Content-Type": "application/json"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _request_timeout=timeout,
    )
    data = await checked(response[0] if isinstance(response, tuple) else response)
    try:
        found: dict[str, Any] = orjson.loads(await data.read() or b"{}")
    finally:
        data.release()
    return found


async def get_object(api: client.ApiClient, path: str, timeout: float = 10.0) -> dict[str, Any]:
    """GET one object as JSON; ApiException (with the server's status) when it is not there."""
    return await call_json(api, "GET", path, timeout=timeout)


def transient(exc: BaseException) -> bool:
    """Worth retrying as it is: the server was busy or unreachable, not the request wrong."""
    if isinstance(exc, ApiException):
        return exc.status in (0, 429) or (exc.status or 0) >= 500
    return isinstance(exc, aiohttp.ClientError | OSError | TimeoutError)


def retry_after(exc: BaseException, cap: float) -> float | None:
    """The seconds ``Retry-After`` asks for (delta-seconds or an HTTP date), at most ``cap``."""
    headers = getattr(exc, "headers", None)
    value = headers.get("Retry-After") if isinstance(headers, Mapping) else None
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(str(value)).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return min(max(seconds, 0.0), cap)
