"""Nodes and pods as the state reads them: a Node's labels, allocatable, taints and readiness,
and what a bound pod uses on its node. Quantities are parsed here, once per object; a malformed
object raises InvalidObject naming it (the caller leaves it out: `state.rejected`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scorer.model import PODS, Node, Taint
from webhook.model.podrequests import stored_pod_requests
from webhook.model.quantity import canonical, parse_quantity
from webhook.state.fields import metadata, object_list, string_map

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def parse_node(obj: Mapping[str, Any], usage: Mapping[str, int]) -> Node:
    """A Node as the scorer needs it: labels, parsed allocatable, taints, readiness, cordon."""
    meta = metadata(obj)
    name = str(meta.get("name", ""))
    where = f"Node {name}"
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    allocatable = {}
    for resource, value in string_map(status.get("allocatable"), f"{where}: status.allocatable").items():
        path = f"{where}: status.allocatable[{resource}]"
        allocatable[resource] = canonical(resource, parse_quantity(value, path), path)
    taints = tuple(
        Taint(str(t.get("key", "")), str(t.get("effect", "")), str(t.get("value", "") or ""))
        for t in object_list(spec.get("taints"), f"{where}: spec.taints")
    )
    conditions = object_list(status.get("conditions"), f"{where}: status.conditions")
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return Node(
        name=name,
        labels=string_map(meta.get("labels"), f"{where}: metadata.labels"),
        allocatable=allocatable,
        taints=taints,
        ready=ready,
        unschedulable=bool(spec.get("unschedulable", False)),
        usage=dict(usage),
    )


def pod_usage(obj: Mapping[str, Any]) -> tuple[str, dict[str, int]] | None:
    """(node, requests incl. one `pods`) of a bound, non-terminal pod; None otherwise."""
    spec = obj.get("spec") or {}
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    phase = (obj.get("status") or {}).get("phase")
    if not node or phase in TERMINAL_PHASES:
        return None
    meta = metadata(obj)
    where = f"Pod {meta.get('namespace', '')}/{meta.get('name', '')}: spec"
    requests = stored_pod_requests(spec, where)
    requests[PODS] = requests.get(PODS, 0) + 1
    return str(node), requests


def add_usage(source: Mapping[str, Mapping[str, int]], into: dict[str, dict[str, int]]) -> None:
    """Add per-node requests of ``source`` into ``into``."""
    for node, requests in source.items():
        target = into.setdefault(node, {})
        for resource, amount in requests.items():
            target[resource] = target.get(resource, 0) + amount
