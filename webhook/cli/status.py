"""`tasgate status`: every tracked gang of a live cluster, with its state, reason and age.

One-shot, without the server: it lists once what live mode watches (the cluster state) and what
the tracker watches (Workloads, Kueue's pods, PodGroups), fills the same ``Ledger`` and classifies
with the same code, so it shows what a running server would. What only a running server knows —
that a gang once fitted before its nodes were lost, a prediction at the moment of admission — it
cannot: such a gang shows as ``never_fits`` with reason ``NeverFits`` rather than ``CapacityLost``.
The objects left out of the cluster state as unusable (`state.rejected`) follow the gangs: a
gang whose queue, flavor or topology is one of them is not judged.

The kubeconfig is kubectl's (``--kubeconfig``, else ``$KUBECONFIG``, else ``~/.kube/config``). Every
namespace is shown unless ``-n`` narrows it: unlike ``kubectl get``, whose default is the context's
namespace, status is the cluster's picture a platform team reads; ``-A`` is accepted and says so.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import yaml
from kubernetes_asyncio import client

from webhook.cli.options import add_kubeconfig_arguments, add_policy_argument
from webhook.cli.sources import list_kinds, state_for
from webhook.files.kubeconfig import default_kubeconfig
from webhook.files.policy import load_policy
from webhook.live.kinds import Kind
from webhook.live.native import slim_pod
from webhook.live.tracked import ledger_table, tracked_kinds
from webhook.live.tracker import cluster_queue_of
from webhook.state.cluster import ClusterState
from webhook.state.rejected import Rejected
from webhook.track.classify import State
from webhook.track.ledger import Ledger, Tracked
from webhook.track.quality import placement, topology_levels
from webhook.track.records import WorkloadRecord, parse_pod

NATIVE_PODS = "native-pods"  # every pod, of which those naming a native PodGroup are kept
FORMATS = ("table", "wide", "json", "yaml")
COLUMNS = ("NAMESPACE", "NAME", "KIND", "QUEUE", "STATE", "REASON", "AGE")
REJECTED_COLUMNS = ("KIND", "NAMESPACE/NAME", "REASON")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_kubeconfig_arguments(parser)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("-n", "--namespace", help="only the gangs of this namespace")
    where.add_argument(
        "-A", "--all-namespaces", dest="namespace", action="store_const", const=None,
        help="the gangs of every namespace (tasgate's default: status is the whole cluster's picture)",
    )  # fmt: skip
    parser.add_argument(
        "-o", "--output", choices=FORMATS, default="table",
        help="table, wide (adds the domains and the message), or a GangStatusList document as json or yaml",
    )  # fmt: skip
    add_policy_argument(parser, "policy file, or 'default' / 'none' (its partialStartAfter)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    policy = load_policy(args.policy)
    kubeconfig = args.kubeconfig or default_kubeconfig()  # status always reads a live cluster
    state = state_for(None, kubeconfig, args.context)
    objects = asyncio.run(_list_tracked(kubeconfig, args.context))
    ledger = Ledger()
    for kind, items in objects.items():
        if kind == NATIVE_PODS:  # the pods naming a native PodGroup (`track.native`)
            ledger.native_pods = {r.key: r for r in (parse_pod(p) for p in items if slim_pod(p))}
        else:
            ledger.replace(kind, items)
    ledger.assess_queued(state, policy)
    now = time.time()
    tracked = [
        t
        for t in ledger.tracked(now, policy.partial_start_after)
        if args.namespace is None or t.gang.workload.namespace == args.namespace
    ]
    # Cluster-scoped objects (ClusterQueues, flavors, topologies) concern every namespace.
    rejected = [r for r in state.rejected if args.namespace in (None, r.namespace) or not r.namespace]
    if args.output in ("json", "yaml"):
        doc = {
            "apiVersion": "tasgate.io/v1",
            "kind": "GangStatusList",
            "items": [item(t, state, now) for t in tracked],
            "rejected": [r.as_json() for r in rejected],
        }
        text = orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"
        # YAML is made from the JSON, so the two documents can never disagree (as `check -o yaml`).
        sys.stdout.write(
            text if args.output == "json" else yaml.safe_dump(orjson.loads(text), sort_keys=False)
        )
    else:
        print(table(tracked, now, wide=args.output == "wide", domains=domains_of(tracked, state)))
        if rejected:
            print(f"\n{rejected_table(rejected)}")
    return 0


def item(t: Tracked, state: ClusterState, now: float) -> dict[str, Any]:
    """One gang in the JSON document."""
    wl, status = t.gang.workload, t.status
    pods = t.gang.pods
    return {
        "namespace": wl.namespace,
        "name": wl.owner.name if wl.owner else wl.name,
        "kind": kind_of(wl),
        "uid": wl.owner.uid if wl.owner else wl.uid,
        "workload": wl.name,
        "queue": wl.queue,
        "clusterQueue": cluster_queue_of(wl, state),
        "state": status.state.value,
        "reason": status.reason,
        "message": status.message,
        "stateSeconds": None if status.since is None else round(max(now - status.since, 0.0), 3),
        "ageSeconds": None if wl.created is None else round(max(now - wl.created, 0.0), 3),
        "pods": {
            "admitted": wl.admitted_pods,
            "scheduled": sum(1 for p in pods if p.node),
            "running": sum(1 for p in pods if p.running),
            "pending": sum(1 for p in pods if p.pending),
        },
        "podGroup": None if t.gang.group is None else t.gang.group.name,
    }


def kind_of(wl: WorkloadRecord) -> str:
    """What the user applied: the owner's kind, else the Workload (or native PodGroup) itself."""
    if wl.owner:
        return wl.owner.kind
    return "PodGroup" if wl.native else "Workload"


def domains_of(tracked: Sequence[Tracked], state: ClusterState) -> dict[tuple[str, str], str]:
    """Per running gang, the domains its pods occupy and the verdict on its request, for -o wide."""
    labels = {n.name: n.labels for n in state.nodes}
    out = {}
    for t in tracked:
        wl = t.gang.workload
        levels = topology_levels(wl, state)
        where = placement(wl, t.gang.pods, levels, labels) if t.status.state is State.RUNNING else None
        if where is not None:
            verdict = f"{where.mode} {where.result}" if where.result else where.mode
            out[wl.key] = f"{where.text(levels)} ({verdict})"
    return out


def table(
    tracked: Sequence[Tracked], now: float, wide: bool = False, domains: Mapping[tuple[str, str], str] = {}
) -> str:
    """kubectl-like; ``-o wide`` adds the running gangs' DOMAINS and every gang's message."""
    header = (*COLUMNS, "DOMAINS", "MESSAGE") if wide else COLUMNS
    rows = [header]
    for t in tracked:
        wl = t.gang.workload
        row = (
            wl.namespace,
            wl.owner.name if wl.owner else wl.name,
            kind_of(wl),
            wl.queue or "<none>",
            t.status.state.value,
            t.status.reason,
            age(None if wl.created is None else now - wl.created),
        )
        rows.append((*row, domains.get(wl.key, "-"), t.status.message) if wide else row)
    if len(rows) == 1:
        return "No gangs found."
    return _columns(rows)


def rejected_table(rejected: Sequence[Rejected]) -> str:
    """The objects left out of the cluster state, under a heading that says so."""
    rows: list[tuple[str, ...]] = [REJECTED_COLUMNS]
    for r in rejected:
        rows.append((r.kind, r.qualified_name, r.why))
    heading = (
        f"Left out of the cluster state as unusable ({len(rejected)}); "
        "gangs that depend on them are not judged:"
    )
    return f"{heading}\n{_columns(rows)}"


def _columns(rows: Sequence[tuple[str, ...]]) -> str:
    """kubectl-style columns: every cell but the last padded to its column's width."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "   ".join([*(cell.ljust(w) for cell, w in zip(r[:-1], widths, strict=True)), r[-1]]).rstrip()
        for r in rows
    )


def age(seconds: float | None) -> str:
    """kubectl's short age: 42s, 5m, 3h, 2d."""
    if seconds is None:
        return "<unknown>"
    s = int(max(seconds, 0))
    if s < 120:
        return f"{s}s"
    if s < 2 * 3600:
        return f"{s // 60}m"
    return f"{s // 3600}h" if s < 2 * 86400 else f"{s // 86400}d"


async def _list_tracked(kubeconfig: str, context: str | None) -> dict[str, list[Mapping[str, Any]]]:
    """The tracked kinds' objects by ledger table (a CRD that is not installed: none)."""
    pods = Kind(NATIVE_PODS, "v1", "Pod", lambda api: client.CoreV1Api(api).list_pod_for_all_namespaces)
    found, _ = await list_kinds(kubeconfig, context, [*tracked_kinds(), pods])
    out: dict[str, list[Mapping[str, Any]]] = {NATIVE_PODS: found.get(NATIVE_PODS, [])}
    for kind in tracked_kinds():
        out[ledger_table(kind.name)] = found.get(kind.name, [])
    return out
