"""Host ports: what keeps two pods of one native group off the same node besides resources.

The kube-scheduler's ``NodePorts`` filter refuses a node where a pod's host port is taken, and in
a PodGroup cycle every pod placed is assumed before the next is tried, so a group whose pods all
bind the same host port places at most one pod per node. Training pods bind host ports more
often than one would think: with ``hostNetwork: true`` (NCCL/RDMA on the host's interfaces) the
API server defaults each declared ``containerPort`` into ``hostPort`` (``SetDefaults_Pod``,
``defaultHostNetworkPorts``, v1.36.5 ``pkg/apis/core/v1/defaults.go``), and
``schedutil.GetHostPorts`` reads the app containers' and the sidecars' (restartable init
containers') ports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Port = tuple[str, int, str]  # (hostIP, hostPort, protocol), as NodePorts compares them


def host_ports(spec: Mapping[str, Any]) -> frozenset[Port]:
    """The host ports a pod of this spec binds (as stored, after the API's defaulting)."""
    network = spec.get("hostNetwork") is True
    containers = list(_items(spec, "containers"))
    containers += [c for c in _items(spec, "initContainers") if c.get("restartPolicy") == "Always"]
    found = set()
    for c in containers:
        for port in _items(c, "ports"):
            host = port.get("hostPort")
            if not (isinstance(host, int) and host > 0) and network:
                host = port.get("containerPort")
            if isinstance(host, int) and host > 0:
                found.add((str(port.get("hostIP") or "0.0.0.0"), host, str(port.get("protocol") or "TCP")))
    return frozenset(found)


def one_per_node(specs: Sequence[Mapping[str, Any]]) -> bool:
    """Whether no two pods of these specs can share a node: every one binds a common host port.
    Pods binding different ports could share one, so they are not held to one per node (never
    a denial the scheduler would not make)."""
    if not specs:
        return False
    common = host_ports(specs[0])
    for spec in specs[1:]:
        common &= host_ports(spec)
    return bool(common)


def _items(parent: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    found = parent.get(key)
    return [x for x in found if isinstance(x, Mapping)] if isinstance(found, list) else []
