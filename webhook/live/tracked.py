"""What the lifecycle tracker watches, next to (not instead of) the Mirror's kinds.

Kueue Workloads; the pods Kueue admitted (label ``kueue.x-k8s.io/podset``: Pending and unbound
ones too, which the Mirror's pod watch leaves out); both gang backends' PodGroups. The names
differ from the Mirror's (``gang-podgroups``), as each watch feeds one sink.
"""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client

from webhook.decide.gangs import GANG_BACKENDS
from webhook.live.kinds import KUEUE, Kind, custom_lister
from webhook.model.workloads.native import NATIVE_API, V1BETA1
from webhook.track.records import PODSET_LABEL

WORKLOADS, GANG_PODS = "workloads", "gang-pods"
# One watch of each gang backend's PodGroups (`decide.gangs`), named after the Mirror's kind.
GANG_GROUP_KINDS = {f"gang-{b.served_kind}": b for b in GANG_BACKENDS.values()}
GANG_PODGROUPS = f"gang-{GANG_BACKENDS['coscheduling'].served_kind}"  # Coscheduling's
# Native PodGroups, v1.36's and v1.37's (their pods come from the Mirror's own watches: ``live.native``).
GANG_NATIVE_PODGROUPS = "gang-nativepodgroups"
GANG_NATIVE_PODGROUPS_V1BETA1 = "gang-nativepodgroups-v1beta1"
NATIVE_TABLES = {
    GANG_NATIVE_PODGROUPS: "nativepodgroups",
    GANG_NATIVE_PODGROUPS_V1BETA1: "nativepodgroups-v1beta1",
}
WORKLOAD_API = f"{KUEUE}/v1beta2"


def tracked_kinds() -> list[Kind]:
    """What the tracker watches, next to (not instead of) the Mirror's kinds."""

    custom = custom_lister

    def pods(api: client.ApiClient) -> Any:
        return client.CoreV1Api(api).list_pod_for_all_namespaces

    return [
        Kind(WORKLOADS, WORKLOAD_API, "Workload", custom(KUEUE, "v1beta2", "workloads"), True),
        Kind(GANG_PODS, "v1", "Pod", pods, kwargs={"label_selector": PODSET_LABEL}),
        *(
            Kind(name, b.api_version, "PodGroup", custom(b.group, b.version, "podgroups"), True)
            for name, b in GANG_GROUP_KINDS.items()
        ),
        Kind(
            GANG_NATIVE_PODGROUPS,
            NATIVE_API,
            "PodGroup",
            custom("scheduling.k8s.io", "v1alpha2", "podgroups"),
            True,
        ),
        Kind(
            GANG_NATIVE_PODGROUPS_V1BETA1,
            V1BETA1,
            "PodGroup",
            custom("scheduling.k8s.io", "v1beta1", "podgroups"),
            True,
        ),
    ]


def ledger_table(kind: str) -> str:
    """The Ledger's table for a tracked kind's name."""
    if kind == WORKLOADS:
        return "workloads"
    if kind == GANG_PODS:
        return "pods"
    if kind in NATIVE_TABLES:
        return NATIVE_TABLES[kind]
    return GANG_GROUP_KINDS[kind].served_kind
