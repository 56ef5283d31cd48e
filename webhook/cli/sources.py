"""Where `tasgate check` and `tasgate test` take cluster state from: files, or a live cluster.

``--kubeconfig`` lists, once, exactly what live mode watches (``live.watch.kinds``), so the
offline verdict and the webhook's are made on the same kinds of objects.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.files.loader import LoadError
from webhook.files.sources import cluster_state, warn_rejected
from webhook.live.api import checked
from webhook.live.watch import Kind, kinds
from webhook.state.cluster import ClusterState, build_state


def state_for(refs: Sequence[str] | None, kubeconfig: str | None, context: str | None) -> ClusterState:
    if kubeconfig:
        if refs:
            raise LoadError("give either --state files or --kubeconfig, not both")
        objects, unserved = asyncio.run(_list_cluster(kubeconfig, context))
        state = build_state(objects, 1, unserved=unserved)
        warn_rejected(state.rejected)
        return state
    if context:
        raise LoadError("--context needs --kubeconfig")
    return cluster_state(refs)


async def _list_cluster(kubeconfig: str, context: str | None) -> tuple[list[Mapping[str, Any]], list[str]]:
    """Every object of the kinds live mode watches, and the (optional) kinds not served."""
    found, unserved = await list_kinds(kubeconfig, context, kinds())
    return [obj for items in found.values() for obj in items], unserved


async def list_kinds(
    kubeconfig: str, context: str | None, wanted: Sequence[Kind]
) -> tuple[dict[str, list[Mapping[str, Any]]], list[str]]:
    """One list of each kind (objects by kind name), and the optional kinds not served."""
    configuration = client.Configuration()
    try:
        await config.load_kube_config(
            config_file=kubeconfig, context=context, client_configuration=configuration
        )
    except (OSError, config.ConfigException) as exc:
        raise LoadError(f"--kubeconfig {kubeconfig}: {exc}") from None
    found: dict[str, list[Mapping[str, Any]]] = {}
    unserved: list[str] = []
    async with client.ApiClient(configuration) as api:
        for kind in wanted:
            try:
                response = await checked(await kind.lister(api)(_preload_content=False, **kind.kwargs))
            except ApiException as exc:
                if exc.status == 404 and kind.optional:
                    unserved.append(kind.name)  # a CRD that is not installed
                    continue
                raise LoadError(f"listing {kind.name}: {exc.status} {exc.reason}") from None
            except OSError as exc:
                raise LoadError(f"listing {kind.name}: {exc}") from None
            body = orjson.loads(await response.read())
            items = body.get("items") or []
            found[kind.name] = [{"apiVersion": kind.api_version, "kind": kind.kind, **i} for i in items]
    return found, unserved
