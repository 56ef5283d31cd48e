"""Small worlds for the quota, flavor-choice and partial-admission tests: ClusterQueues with real
quotas, Cohorts, admitted Workloads that hold quota, and bound pods that hold capacity."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tests.webhook.conftest import GPU, HOST, REQUIRED, job, node
from webhook.decide.decision import decide
from webhook.decide.policy import Policy
from webhook.decide.verdicts import Decision, Review
from webhook.state.cluster import ClusterState, build_state

KUEUE = "kueue.x-k8s.io/v1beta2"
LEVELS = ("block", "rack", HOST)
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"


def resources(gpus: int | str, **limits: Mapping[str, int | str]) -> list[dict[str, Any]]:
    """cpu and memory ample, ``gpus`` of nominal quota; ``limits``: field -> {resource: amount}."""
    quota: list[dict[str, Any]] = [
        {"name": "cpu", "nominalQuota": "1000"},
        {"name": "memory", "nominalQuota": "100Ti"},
        {"name": GPU, "nominalQuota": str(gpus)},
    ]
    for key, amounts in limits.items():
        for entry in quota:
            if entry["name"] in amounts:
                entry[key] = str(amounts[entry["name"]])
    return quota


def cluster_queue(
    name: str,
    flavors: Sequence[tuple[str, list[dict[str, Any]]]],
    cohort: str | None = None,
    when_can_borrow: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", GPU],
                "flavors": [{"name": f, "resources": quota} for f, quota in flavors],
            }
        ],
    }
    if cohort:
        spec["cohortName"] = cohort
    if when_can_borrow:
        spec["flavorFungibility"] = {"whenCanBorrow": when_can_borrow}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def cohort(
    name: str, parent: str | None = None, flavors: Sequence[tuple[str, list[dict[str, Any]]]] = ()
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if flavors:
        spec["resourceGroups"] = [
            {
                "coveredResources": ["cpu", "memory", GPU],
                "flavors": [{"name": f, "resources": quota} for f, quota in flavors],
            }
        ]
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def flavors_and_topology(pools: Mapping[str, str]) -> list[dict[str, Any]]:
    """The Topology "topo" and one TAS ResourceFlavor per (name, node pool)."""
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": KUEUE,
            "kind": "Topology",
            "metadata": {"name": "topo"},
            "spec": {"levels": [{"nodeLabel": level} for level in LEVELS]},
        }
    ]
    for name, pool in pools.items():
        objects.append(
            {
                "apiVersion": KUEUE,
                "kind": "ResourceFlavor",
                "metadata": {"name": name},
                "spec": {"nodeLabels": {"pool": pool}, "topologyName": "topo"},
            }
        )
    return objects


def local_queue(name: str, cq: str, namespace: str = "team") -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def rack(pool: str, hosts: int = 4, prefix: str = "") -> list[dict[str, Any]]:
    """One block with one rack of ``hosts`` 8-GPU nodes of ``pool``."""
    p = prefix or pool
    labels = {"block": f"{p}-b", "rack": f"{p}-r", "pool": pool}
    return [node(f"{p}-h{h}", labels) for h in range(hosts)]


def admitted(name: str, cq: str, usage: Mapping[str, str], flavor: str, count: int = 1) -> dict[str, Any]:
    """A Workload holding quota in ``cq`` (no topology assignment: it takes no node capacity)."""
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "other"},
        "spec": {"podSets": [{"name": "main", "count": count, "template": {"spec": {"containers": []}}}]},
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True"}],
            "admission": {
                "clusterQueue": cq,
                "podSetAssignments": [
                    {
                        "name": "main",
                        "count": count,
                        "flavors": dict.fromkeys(usage, flavor),
                        "resourceUsage": dict(usage),
                    }
                ],
            },
        },
    }


def busy(node_name: str, gpus: int = 8) -> dict[str, Any]:
    """A bound pod that is not a TAS pod: it holds ``gpus`` of ``node_name`` now."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"busy-{node_name}", "namespace": "other"},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"requests": {GPU: str(gpus)}}}],
        },
        "status": {"phase": "Running"},
    }


def gang(
    pods: int, gpus: int = 8, level: str = "rack", queue: str = "q", minimum: int | None = None
) -> dict[str, Any]:
    obj = job(pods, gpus=gpus, annotations={REQUIRED: level}, queue=queue, namespace="team")
    if minimum is not None:
        obj["metadata"]["annotations"] = {MIN_PARALLELISM: str(minimum)}
    return obj


def state(*objects: dict[str, Any] | list[dict[str, Any]]) -> ClusterState:
    flat: list[dict[str, Any]] = []
    for o in objects:
        flat.extend(o if isinstance(o, list) else [o])
    return build_state(flat)


def judge(obj: Mapping[str, Any], world: ClusterState, policy: Policy) -> Decision:
    return decide(Review(obj, namespace="team"), world, policy)


def hosts_now(d: Decision) -> dict[str, int]:
    (v,) = [v for v in d.pod_sets if v.judged]
    assert v.now is not None and v.now.assignment is not None
    found: dict[str, int] = {}
    for domain in v.now.assignment.domains:
        found[domain.values[-1]] = found.get(domain.values[-1], 0) + domain.count
    return found
