"""A cluster-sized world on the real API server, made fast: Nodes and bound Pods over an asyncio client.

``make e2e-scale`` (tests/e2e_scale) needs 5,000 Nodes and 50,000 bound Pods; ``kubectl apply`` of
that many objects takes far too long, so this module talks to kube-apiserver directly with aiohttp
as the harness admin, with a bounded number of requests in flight.

The world (see `Shape`): blocks of racks of 8-GPU hosts, the Kueue objects of e2e/kueue_scenario.py
(Topology block > rack > hostname, flavor ``pool: gpu``). Every host carries the same number of
bound Pods. Most hosts are *busy*: their Pods hold 7 of the 8 GPUs. One host in five is *free*: its
Pods ask for CPU only. One rack, the *target*, is free throughout. A gang of `Shape.gang_pods`
whole-host Pods that requires one rack therefore fits now in the target rack only (any other rack
has `Shape.free_per_busy_rack` free hosts, fewer than the gang), and still fits every rack when
empty: deleting the target rack's Nodes turns "fits" into "must wait".

What the API server leaves, as a real cluster without kubelets would: Node status (allocatable,
the Ready condition) goes through the status subresource, since create ignores status; the
``node.kubernetes.io/not-ready`` taint the API server puts on every new Node is lifted the way the
node lifecycle controller lifts it for a Ready node (e2e/nodes.py does the same through kubectl).
Pods are created with ``spec.nodeName`` and stay ``Pending``: nothing runs them, and bound
non-terminal Pods are what Kueue and tasgate count as usage.
"""

from __future__ import annotations

import asyncio
import functools
import os
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from e2e.controlplane import ControlPlane
from e2e.kueue_scenario import BLOCK, GPUS_PER_NODE, NODE_POOL, RACK
from e2e.nodes import DEFAULT_ALLOCATABLE, GPU, node_manifest, ready_status

USAGE_NAMESPACE = "scale-usage"
BUSY_GPUS = GPUS_PER_NODE - 1  # a busy host keeps one GPU free: never room for a whole-host Pod
FREE_EVERY = 5  # one host in five of a busy rack is free
MERGE_PATCH = "application/merge-patch+json"
RETRIED = frozenset({429, 500, 503, 504})  # throttling and etcd timeouts under load: try again
ATTEMPTS = 8
LANDED = frozenset({("POST", 409), ("DELETE", 404)})  # on a retry: the earlier attempt took effect

# For this volume: more requests in flight than the defaults (400 / 200), and no audit events for
# Pods and Nodes (the harness logs writes with their bodies, in blocking mode: 60,000 of them).
# Later flags win, so these follow the harness's own.
SCALE_AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "None", "resources": [{"group": "", "resources": ["pods", "pods/*", "nodes", "nodes/*"]}]},
        {"level": "Metadata"},
    ],
}


def apiserver_args(workdir: Path) -> list[str]:
    """Extra kube-apiserver flags for the scale world (its audit policy is written into ``workdir``)."""
    policy = workdir / "scale-audit-policy.json"
    policy.write_bytes(orjson.dumps(SCALE_AUDIT_POLICY))
    return [
        "--max-requests-inflight=1000",
        "--max-mutating-requests-inflight=600",
        f"--audit-policy-file={policy}",
    ]


@dataclass(frozen=True)
class Shape:
    """How big the world is; `from_env` shrinks it for iteration (defaults: issue 10's full scale)."""

    nodes: int = 5000
    pods: int = 50000
    nodes_per_rack: int = 50
    racks_per_block: int = 10
    churn_per_s: float = 100.0  # background Pod creates + deletes per second
    concurrency: int = 48  # API requests in flight while building the world

    @classmethod
    def from_env(cls) -> Shape:
        """From ``TASGATE_SCALE_NODES``, ``_PODS``, ``_RACK``, ``_RACKS_PER_BLOCK``, ``_CHURN``,
        ``_CONCURRENCY``; each unset one keeps its default."""
        env = os.environ.get
        shape = cls(
            nodes=int(env("TASGATE_SCALE_NODES", cls.nodes)),
            pods=int(env("TASGATE_SCALE_PODS", cls.pods)),
            nodes_per_rack=int(env("TASGATE_SCALE_RACK", cls.nodes_per_rack)),
            racks_per_block=int(env("TASGATE_SCALE_RACKS_PER_BLOCK", cls.racks_per_block)),
            churn_per_s=float(env("TASGATE_SCALE_CHURN", cls.churn_per_s)),
            concurrency=int(env("TASGATE_SCALE_CONCURRENCY", cls.concurrency)),
        )
        shape.check()
        return shape

    def check(self) -> None:
        """Refuse a shape in which the target rack would not be the only one the gang fits now."""
        if self.nodes % self.nodes_per_rack or self.nodes // self.nodes_per_rack < 2:
            raise ValueError(f"{self.nodes} nodes are not at least 2 whole racks of {self.nodes_per_rack}")
        if not self.free_per_busy_rack < self.gang_pods <= self.nodes_per_rack:
            raise ValueError(f"racks of {self.nodes_per_rack} leave no gang size that only the target fits")
        if self.pods < self.nodes:
            raise ValueError(f"{self.pods} pods: at least one per node ({self.nodes}) is needed")

    @property
    def racks(self) -> int:
        return self.nodes // self.nodes_per_rack

    @property
    def pods_per_node(self) -> int:
        return self.pods // self.nodes

    @property
    def gang_pods(self) -> int:
        """Four fifths of a rack: more than a busy rack's free hosts, fewer than a whole rack."""
        return self.nodes_per_rack * 4 // 5

    @property
    def free_per_busy_rack(self) -> int:
        return len(range(0, self.nodes_per_rack, FREE_EVERY))

    @property
    def target_rack(self) -> int:
        return self.racks // 2


def node_name(i: int) -> str:
    return f"n{i:05d}"


def rack_name(shape: Shape, rack: int) -> str:
    return f"b{rack // shape.racks_per_block}-r{rack % shape.racks_per_block}"


def node_labels(shape: Shape, i: int) -> dict[str, str]:
    rack = i // shape.nodes_per_rack
    return {**NODE_POOL, BLOCK: f"b{rack // shape.racks_per_block}", RACK: rack_name(shape, rack)}


def target_nodes(shape: Shape) -> list[str]:
    first = shape.target_rack * shape.nodes_per_rack
    return [node_name(i) for i in range(first, first + shape.nodes_per_rack)]


def is_busy(shape: Shape, i: int) -> bool:
    rack, slot = divmod(i, shape.nodes_per_rack)
    return rack != shape.target_rack and slot % FREE_EVERY != 0


def gpu_split(total: int, pods: int) -> list[int]:
    """``total`` GPUs over ``pods`` Pods as evenly as whole GPUs allow (10 Pods, 7 GPUs: 7 × 1, 3 × 0)."""
    share, extra = divmod(total, pods)
    return [share + 1 if k < extra else share for k in range(pods)]


def node_pod_gpus(shape: Shape, i: int) -> list[int]:
    """The GPUs of each Pod bound to host ``i``."""
    return gpu_split(BUSY_GPUS if is_busy(shape, i) else 0, shape.pods_per_node)


def usage_pod(name: str, node: str, gpus: int) -> dict[str, Any]:
    """A bound Pod as a controller would create it after scheduling: requests, limits, ``nodeName``."""
    requests: dict[str, str] = {"cpu": "500m", "memory": "1Gi"}
    limits: dict[str, str] = {}
    if gpus:
        requests[GPU] = limits[GPU] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": USAGE_NAMESPACE, "labels": {"app": "usage"}},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/job:1",
                    "resources": {"requests": requests, "limits": limits},
                }
            ],
        },
    }


class ApiError(RuntimeError):
    """The API server refused a request (after retrying throttling and timeouts)."""


class Api:
    """kube-apiserver over TLS as the harness admin (``system:masters``), requests as JSON bytes."""

    def __init__(self, cp: ControlPlane, connections: int) -> None:
        context = ssl.create_default_context(cafile=str(cp.ca_path))
        context.load_cert_chain(*map(str, cp.admin_cert))
        self.server = cp.server
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=context, limit=connections),
            timeout=aiohttp.ClientTimeout(total=60),
        )

    async def close(self) -> None:
        await self.session.close()

    async def call(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        """One request; a 429 (or a 5xx timeout under load) is retried with growing pauses."""
        data = None if body is None else orjson.dumps(body)
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        attempt = 0
        while True:
            async with self.session.request(method, self.server + path, data=data, headers=headers) as r:
                text = await r.read()
                if r.status < 300:
                    return orjson.loads(text)
                if attempt and (method, r.status) in LANDED:
                    return {}  # the timed-out first attempt had done it after all
                attempt += 1
                if r.status not in RETRIED or attempt == ATTEMPTS:
                    raise ApiError(f"{method} {path}: {r.status} {text[:500].decode(errors='replace')}")
            await asyncio.sleep(0.05 * 2**attempt)

    async def add_node(self, name: str, labels: dict[str, str]) -> None:
        """Create a Node, write its Ready status, lift the not-ready taint (three requests, in order)."""
        await self.call("POST", "/api/v1/nodes", node_manifest(name, labels))
        await self.call(
            "PATCH", f"/api/v1/nodes/{name}/status", ready_status(DEFAULT_ALLOCATABLE), MERGE_PATCH
        )
        await self.call("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": None}}, MERGE_PATCH)

    async def add_pod(self, pod: dict[str, Any]) -> None:
        await self.call("POST", f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", pod)

    async def delete_pod(self, namespace: str, name: str) -> None:
        await self.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}")

    async def delete_node(self, name: str) -> None:
        await self.call("DELETE", f"/api/v1/nodes/{name}")


async def run_bounded(jobs: Iterable[Callable[[], Awaitable[None]]], concurrency: int) -> None:
    """Run every job, ``concurrency`` at a time, pulling lazily (50,000 jobs are never all in memory)."""
    queue = iter(jobs)

    async def worker() -> None:
        for job in queue:
            await job()

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def add_nodes(api: Api, shape: Shape) -> float:
    """Every Node of the world, Ready and untainted; the seconds it took."""
    start = time.perf_counter()
    jobs = (functools.partial(api.add_node, node_name(i), node_labels(shape, i)) for i in range(shape.nodes))
    await run_bounded(jobs, shape.concurrency)
    return time.perf_counter() - start


def world_pods(shape: Shape) -> Iterable[dict[str, Any]]:
    for i in range(shape.nodes):
        for k, gpus in enumerate(node_pod_gpus(shape, i)):
            yield usage_pod(f"{node_name(i)}-p{k}", node_name(i), gpus)


async def add_pods(api: Api, shape: Shape) -> float:
    """Every bound usage Pod of the world; the seconds it took."""
    start = time.perf_counter()
    await run_bounded((functools.partial(api.add_pod, p) for p in world_pods(shape)), shape.concurrency)
    return time.perf_counter() - start


async def delete_nodes(api: Api, names: list[str], concurrency: int) -> None:
    await run_bounded((functools.partial(api.delete_node, n) for n in names), concurrency)
