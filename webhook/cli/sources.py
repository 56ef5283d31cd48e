"""Where `tasgate check`, `map`, `test` and `status` take cluster state from: files, or a live cluster.

``--kubeconfig`` lists, once, exactly what live mode watches (``live.kinds.kinds``), so the
offline verdict and the webhook's are made on the same kinds of objects. Which kubeconfig files
and context are read is ``files.kubeconfig``'s (kubectl's rules).

A state that can place nothing is said so before any verdict: one with no nodes is an error (every
workload would read "never fits", which is the dump's fault, not theirs); one with no Kueue objects
at all gets a warning once, and each workload that names a queue reads "not checked" with the
missing object named.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import orjson
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.cli.dump import command
from webhook.files.kubeconfig import locate
from webhook.files.loader import LoadError
from webhook.files.sources import cluster_state, warn_rejected
from webhook.live.api import checked
from webhook.live.kinds import Kind, kinds
from webhook.live.native import API_KINDS, slim_job, slim_pod
from webhook.live.native_kinds import native_kinds
from webhook.model.workloads.native import V1ALPHA3
from webhook.state.cluster import ClusterState, build_state

KUEUE_DUMP = command("kueue")  # the kinds `check --live` reads (``dump``), never typed twice
NODE_DUMP = command("core")


def state_for(refs: Sequence[str] | None, kubeconfig: str | None, context: str | None) -> ClusterState:
    """The state of the dumps ``refs``, of the cluster of ``kubeconfig`` (a path or a list, with
    ``context``), else of the embedded sample cluster."""
    if kubeconfig:
        if refs:
            raise LoadError(
                "give either --state files or a cluster (--live, --kubeconfig, --context), not both"
            )
        objects, unserved = asyncio.run(_list_cluster(kubeconfig, context))
        state = build_state(objects, 1, unserved=unserved)
        warn_rejected(state.rejected)
        return state
    return cluster_state(refs)


def with_workers(state: ClusterState, workers: Sequence[str]) -> ClusterState:
    """``state`` with the MultiKueue worker clusters ``NAME=FILE|DIR`` (`decide.kueue.multikueue`)."""
    found: dict[str, ClusterState] = {}
    for given in workers:
        name, sep, where = given.partition("=")
        if not sep or not name or not where:
            raise LoadError(f"--worker {given!r}: give NAME=FILE|DIR (a dump of that worker cluster)")
        if name in found:
            raise LoadError(f"--worker {name!r} is given twice")
        found[name] = checkable(cluster_state([where]), f"worker {name} ({where})")
    return replace(state, workers=found) if found else state


def source_name(refs: Sequence[str] | None, kubeconfig: str | None, context: str | None) -> str:
    """Where the state came from, in the words of the flags that said so."""
    if kubeconfig:
        return f"kubeconfig {kubeconfig}" + (f" (context {context})" if context else "")
    return ", ".join(refs) if refs else "the sample cluster"


def checkable(state: ClusterState, source: str) -> ClusterState:
    """``state`` when workloads can be judged on it; no nodes is an error, no Kueue object a warning."""
    if not state.nodes:
        left_out = sum(r.kind == "Node" for r in state.rejected)
        usable = f" usable ({left_out} left out)" if left_out else ""
        raise LoadError(
            f"{source}: the cluster state has no{usable} nodes, so nothing can be placed; "
            f"give them too (`{NODE_DUMP}`)"
        )
    kueue = state.topologies or state.flavors or state.cluster_queues or state.local_queues
    if not kueue and not state.native.served:  # a native v1.36 cluster needs no Kueue objects
        print(
            f"tasgate: warning: {source}: the cluster state has no Topology, ResourceFlavor, "
            f"ClusterQueue or LocalQueue, so a workload that names a queue is not checked; "
            f"give them too (`{KUEUE_DUMP}`)",
            file=sys.stderr,
        )
    return state


async def _list_cluster(kubeconfig: str, context: str | None) -> tuple[list[Mapping[str, Any]], list[str]]:
    """Every object of the kinds live mode watches, and the (optional) kinds not served. The
    native v1.36 kinds as the live Mirror keeps them: Jobs and unbound pods only when the
    native API answered (slimmed to the gang candidates and the pods naming a PodGroup), and
    the API's discovery document, so an empty served API reads as served, as in a dump."""
    extra = native_kinds(None)
    api = [k for k in extra if k.name in API_KINDS]
    found, unserved = await list_kinds(kubeconfig, context, [*kinds(), *api])
    objects = [obj for items in found.values() for obj in items]
    served = sorted({k.api_version for k in api if k.name in found})
    if served:
        rest, _ = await list_kinds(kubeconfig, context, [k for k in extra if k.name not in API_KINDS])
        objects += [kept for items in rest.values() for kept in map(_slim, items) if kept is not None]
        objects += [native_discovery(version) for version in served]
    return objects, unserved


def native_discovery(group_version: str) -> dict[str, Any]:
    """The served group-version's discovery document, as ``kubectl get --raw /apis/<gv>`` gives it."""
    resources = [{"name": "workloads", "kind": "Workload"}, {"name": "podgroups", "kind": "PodGroup"}]
    if group_version == V1ALPHA3:
        resources.append({"name": "compositepodgroups", "kind": "CompositePodGroup"})
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


def _slim(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    return slim_job(obj) if obj.get("kind") == "Job" else slim_pod(obj)


async def list_kinds(
    kubeconfig: str, context: str | None, wanted: Sequence[Kind]
) -> tuple[dict[str, list[Mapping[str, Any]]], list[str]]:
    """One list of each kind (objects by kind name), and the optional kinds not served."""
    files = locate(kubeconfig)
    configuration = client.Configuration()
    try:
        await config.load_kube_config(
            config_file=files.config_file, context=files.use(context), client_configuration=configuration
        )
    except (OSError, config.ConfigException) as exc:
        raise LoadError(f"kubeconfig {kubeconfig}: {exc}") from None
    found: dict[str, list[Mapping[str, Any]]] = {}
    unserved: list[str] = []
    async with client.ApiClient(configuration) as api:
        for kind in wanted:
            try:
                response = await checked(await kind.lister(api)(_preload_content=False, **kind.kwargs))
            except ApiException as exc:
                if kind.optional and (exc.status == 404 or (exc.status == 403 and kind.forbidden_ok)):
                    unserved.append(kind.name)  # a CRD that is not installed, or not ours to read
                    continue
                raise LoadError(f"listing {kind.name}: {exc.status} {exc.reason}") from None
            except OSError as exc:
                raise LoadError(f"listing {kind.name}: {exc}") from None
            body = orjson.loads(await response.read())
            items = body.get("items") or []
            found[kind.name] = [{"apiVersion": kind.api_version, "kind": kind.kind, **i} for i in items]
    return found, unserved
