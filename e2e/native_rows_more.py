"""More rows of the native proof table: what a platform engineer submits beyond the plain GPU
gang. Pods written out in full (odd quantity units, sidecars, ephemeral-storage, an extended
resource no node has, required node affinity, tolerations), nodes changed for the row (a taint,
a cordon, a key only some nodes carry), bound pods that finished or ask for nothing, a
LimitRange filling in requests, a Workload of two templates.

The cluster is e2e/native_scenario.py's: free now r0 16 GPUs (hosts 0/8/8), r1 20 (4/8/8),
r2 12 (0/4/8), r3 22 (6/8/8); a node is 32 cpu, 256Gi, 8 GPUs, 400Gi ephemeral-storage.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from e2e.kueue_scenario import RACK
from e2e.native_row import FITS, NEVER, WAITS, NodeChange, Row
from e2e.native_scenario import (
    HOSTNAME,
    Shape,
    bound_pod,
    group_name,
    indexed_job,
    workload_and_group,
)
from e2e.nodes import GPU

POOL = "topology.example.com/pool"  # carried by five nodes only (pool_nodes)
TAINT = {"key": "dedicated", "value": "inference", "effect": "NoSchedule"}


def container(
    cpu: str | None,
    memory: str | None,
    gpus: int = 0,
    extra: Mapping[str, str] | None = None,
    name: str = "train",
) -> dict[str, Any]:
    """One container asking for what is given (GPUs and ``extra`` as requests and limits)."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    scalar = {**({GPU: str(gpus)} if gpus else {}), **(extra or {})}
    resources: dict[str, Any] = {}
    if requests or scalar:
        resources["requests"] = {**requests, **scalar}
    if scalar:
        resources["limits"] = dict(scalar)
    return {"name": name, "image": "trainer:latest", "resources": resources}


def spec(*containers: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "containers": list(containers),
        **fields,
    }


def written(
    name: str,
    namespace: str,
    specs: Sequence[Mapping[str, Any]],
    min_count: int | None,
    key: str | None,
    group: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Pods of the given specs naming the row's PodGroup, then its Workload and PodGroup."""
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{name}-{i}", "namespace": namespace, "labels": {"group": name}},
            "spec": {**s, "schedulingGroup": {"podGroupName": group_name(name)}},
        }
        for i, s in enumerate(specs)
    ]
    return [*pods, *(group or workload_and_group(name, namespace, min_count, key))]


def pods_row(
    name: str,
    intent: str,
    specs: Sequence[Mapping[str, Any]],
    min_count: int | None,
    key: str | None,
    **more: Any,
) -> Row:
    objects = lambda ns: written(name, ns, specs, min_count, key)  # noqa: E731
    return Row(name, intent, objects, len(specs), min_count, key, **more)


def two_templates(name: str, namespace: str) -> list[dict[str, Any]]:
    """A Workload of a keyless basic ``driver`` template and a rack gang ``workers`` of 4; only the
    workers' PodGroup and pods exist."""
    workload, group = workload_and_group(name, namespace, 4, RACK)
    driver = {"name": "driver", "schedulingPolicy": {"basic": {}}}
    workload["spec"]["podGroupTemplates"].insert(0, driver)
    return [workload, group]


def limit_range(namespace: str) -> dict[str, Any]:
    """Requests LimitRanger fills into a container that states none: 2 such pods per node."""
    default = {"cpu": "16", "memory": "128Gi"}
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "defaults", "namespace": namespace},
        "spec": {"limits": [{"type": "Container", "defaultRequest": default, "default": default}]},
    }


def gpu_only_job_in_group(name: str, namespace: str, pods: int, key: str) -> list[dict[str, Any]]:
    """An Indexed Job of 1-GPU pods that state no cpu or memory, joining a hand-written gang."""
    job = indexed_job(name, namespace, pods, 1, group_name(name))
    job["spec"]["template"]["spec"]["containers"] = [container(None, None, 1)]
    return [*workload_and_group(name, namespace, pods, key), job]


def idle_pod(name: str, namespace: str, node: str) -> dict[str, Any]:
    """A bound pod asking for nothing (a best-effort agent)."""
    pod = bound_pod(name, namespace, node, Shape(0))
    pod["spec"]["containers"] = [{"name": "agent", "image": "agent:latest"}]
    return pod


def pool_nodes() -> tuple[NodeChange, ...]:
    """``pool`` p1 on r2-h1, r2-h2, r3-h0 (4, 8, 6 GPUs free), p2 on r0-h1, r1-h1 (8, 8)."""
    p1 = ("r2-h1", "r2-h2", "r3-h0")
    return tuple(NodeChange(n, labels={POOL: "p1" if n in p1 else "p2"}) for n in (*p1, "r0-h1", "r1-h1"))


def affinity(*racks: str) -> dict[str, Any]:
    expression = {"key": RACK, "operator": "NotIn", "values": list(racks)}
    terms = [{"matchExpressions": [expression]}]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


GPU4 = container("16", "128Gi", 4)  # the node's own ratio
# 4 cpu + a 14-cpu sidecar: 18 cpu, one pod per node (two if the sidecar were not counted).
SIDECAR = spec(
    container("4", "32Gi", 4),
    initContainers=[{**container("14", "8Gi", name="proxy"), "restartPolicy": "Always"}],
)
# A 20-cpu init container: the pod asks for max(20, 4) cpu, one pod per node.
INIT = spec(container("4", "32Gi", 4), initContainers=[container("20", "1Gi", name="warmup")])
HOSTNET = spec(
    {**container("8", "64Gi", 2), "ports": [{"containerPort": 29500, "name": "nccl"}]}, hostNetwork=True
)

MORE_ROWS: tuple[Row, ...] = (
    # Memory-bound, odd units: 85.5Gi twice per node (three would be 256.5Gi > 256Gi). r3 holds 6
    # (its first host has 192Gi free), no rack holds 7 even empty.
    pods_row("mem-85-5gi-rack-6", FITS, [spec(container("1500m", "85.5Gi"))] * 6, 6, RACK),
    pods_row("mem-85-5gi-rack-7-never", NEVER, [spec(container("1500m", "85.5Gi"))] * 7, 7, RACK),
    # cpu-bound: 10.7 cpu twice per node (32.1 > 32): r3 alone holds 6.
    pods_row("cpu-10-7-rack-6", FITS, [spec(container("10.7", "1.5Gi"))] * 6, 6, RACK),
    # A sidecar's (init container, restartPolicy Always) cpu adds to the pod's: one pod per node.
    pods_row("sidecar-rack-3", FITS, [SIDECAR] * 3, 3, RACK),
    pods_row("init-rack-3", FITS, [INIT] * 3, 3, RACK),
    # 150Gi of ephemeral-storage twice per node: r1 and r3 hold 6, r1 the fuller.
    pods_row(
        "ephemeral-rack-6",
        FITS,
        [spec(container("1", "1Gi", 1, {"ephemeral-storage": "150Gi"}))] * 6,
        6,
        RACK,
    ),
    # An extended resource no node advertises.
    pods_row(
        "fpga-rack-2-never", NEVER, [spec(container("1", "1Gi", 1, {"example.com/fpga": "1"}))] * 2, 2, RACK
    ),
    # Required node affinity rack NotIn r0, r3: r1 (5 slots of 4 GPUs) over r2 (3).
    pods_row("affinity-not-r0-r3-rack-4", FITS, [spec(GPU4, affinity=affinity("r0", "r3"))] * 4, 4, RACK),
    # A NoSchedule taint on r0-h1 leaves r0 2 slots: r1, the fuller of r1 and r3; tolerated, r0.
    pods_row(
        "taint-r0h1-rack-4", FITS, [spec(GPU4)] * 4, 4, RACK, nodes=(NodeChange("r0-h1", taints=(TAINT,)),)
    ),
    pods_row(
        "tolerate-r0h1-rack-4",
        FITS,
        [spec(GPU4, tolerations=[{"key": "dedicated", "operator": "Exists"}])] * 4,
        4,
        RACK,
        nodes=(NodeChange("r0-h1", taints=(TAINT,)),),
    ),
    pods_row(
        "cordon-r0h2-rack-4", FITS, [spec(GPU4)] * 4, 4, RACK, nodes=(NodeChange("r0-h2", cordon=True),)
    ),
    # A key only five nodes carry: p1 (3 nodes) and p2 (2) each hold 4 slots now; p2 is the fuller.
    pods_row("pool-key-4", FITS, [spec(GPU4)] * 4, 4, POOL, nodes=pool_nodes()),
    pods_row("pool-key-7-never", NEVER, [spec(GPU4)] * 7, 7, POOL, nodes=pool_nodes()),
    # Basic at hostname: one 6-GPU pod per host; r3-h0 (6 free) is the fullest after; 2 stay pending.
    pods_row("basic-host-3x6", FITS, [spec(container("24", "192Gi", 6))] * 3, None, HOSTNAME),
    # minCount 2 of 3 at hostname: r3-h0 and every free host hold 2; r3-h0 the fullest.
    pods_row("host-min2-of-3x3", FITS, [spec(container("12", "96Gi", 3))] * 3, 2, HOSTNAME),
    # minCount 3 of 2 x 8 GPUs (tried first) + 3 x 4: r1 and r3 place 3, r1 is the fuller.
    pods_row(
        "mixed-min3-of-5",
        FITS,
        [*[spec(container("32", "256Gi", 8), priorityClassName="first")] * 2, *[spec(GPU4)] * 3],
        3,
        RACK,
    ),
    Row(
        "two-templates-rack-4",
        FITS,
        lambda ns: written(
            "two-templates-rack-4", ns, [spec(GPU4)] * 4, 4, RACK, two_templates("two-templates-rack-4", ns)
        ),
        4,
        4,
        RACK,
    ),
    Row("job-7x8-exact", FITS, lambda ns: [indexed_job("job-7x8-exact", ns, 7, 8)], 7, 7, None, job=True),
    # Best-effort pods: scored as 100m / 200Mi each; r2 is the fullest.
    pods_row("besteffort-rack-3", FITS, [spec({"name": "s", "image": "pause"})] * 3, 3, RACK),
    # r1 and r3 equally used (a 2-GPU pod on r3-h0); 20 best-effort pods bound in r3 count
    # 100m / 200Mi each in the placement score (NonZeroRequested): r3 by one point.
    pods_row(
        "besteffort-bound-tips-rack-2",
        FITS,
        [spec(GPU4, affinity=affinity("r0", "r2"))] * 2,
        2,
        RACK,
        setup=lambda ns: [
            bound_pod("two-gpus", ns, "r3-h0", Shape(2)),
            *[idle_pod(f"idle-{i}", ns, "r3-h1") for i in range(20)],
        ],
    ),
    # hostNetwork with a declared port (NCCL): the API server makes it a host port, so NodePorts
    # takes one pod per node. 3 x 2 GPUs need three hosts of a rack with 2 free: r1 and r3 (r0
    # and r2 have a full host), r1 the fuller; 4 never fit a rack of 3 hosts.
    pods_row("hostnet-rack-3x2", FITS, [HOSTNET] * 3, 3, RACK),
    pods_row("hostnet-rack-4x2-never", NEVER, [HOSTNET] * 4, 4, RACK),
    # A pod that finished (Succeeded) on r0-h1 holds nothing: r0 still holds 4.
    pods_row(
        "finished-pod-rack-4",
        FITS,
        [spec(GPU4)] * 4,
        4,
        RACK,
        setup=lambda ns: [bound_pod("done", ns, "r0-h1", Shape(8))],
        finished=("done",),
    ),
    # A LimitRange fills 16 cpu / 128Gi into 1-GPU containers that state none: 2 per node, so a
    # rack gang of 6 needs an empty rack.
    Row(
        "limitrange-job-rack-6-wait",
        WAITS,
        lambda ns: gpu_only_job_in_group("limitrange-job-rack-6-wait", ns, 6, RACK),
        6,
        6,
        RACK,
        setup=lambda ns: [limit_range(ns)],
    ),
)
