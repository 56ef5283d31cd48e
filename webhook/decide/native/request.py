"""A native group's pods as the kube-scheduler reads them: one `NativeRequest` for the scorer.

Requests are the pods' after the API server's LimitRanger and RuntimeClass admission filled in
what a Job's template (or a manifest's pod) leaves out; on pods already created that is a no-op.
Pods of several shapes are queued in the PodGroup cycle's order (priority, then creation: here the
order seen); the pods already bound pin the group's domain (``getScheduledPodsTopologyDomain``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from scorer.native import NativeRequest, bound_domain
from webhook.decide.native.ports import one_per_node
from webhook.decide.native.subject import Group
from webhook.model.podrequests import PodDefaults, pod_requests
from webhook.model.scheduling import read_scheduling
from webhook.state.cluster import ClusterState


def native_request(g: Group, state: ClusterState, defaults: PodDefaults) -> NativeRequest:
    """The group's queued pods, its bound ones and their domain, as the scorer takes them."""
    spec = g.pod_spec or {}
    found = read_scheduling(spec, g.spec_path)
    return NativeRequest(
        name=g.spec.name,
        count=g.count,
        min_count=g.spec.min_count,
        requests=pod_requests(spec, g.spec_path, defaults),
        key=g.spec.key,
        tolerations=found.tolerations,
        node_selector=found.node_selector,
        affinity=found.affinity,
        scheduled=g.members.bound,
        bound_domain=_bound_domain(g, state),
        pods=_queued_shapes(g, state, defaults),
        host_ports=one_per_node(g.pod_specs or [spec]),
    )


def on_empty(req: NativeRequest) -> NativeRequest:
    """The same group on the empty cluster: every pod queued, none bound anywhere."""
    return replace(req, count=req.count + req.scheduled, scheduled=0, bound_domain=None)


def several_sizes(g: Group, defaults: PodDefaults) -> bool:
    """Every queued pod is known one by one, and they do not all ask for the same."""
    if len(g.pod_specs) < 2 or len(g.pod_specs) != g.count:
        return False
    shapes = [pod_requests(spec, g.spec_path, defaults) for spec in g.pod_specs]
    return any(shape != shapes[0] for shape in shapes)


def pod_priority(spec: Mapping[str, Any], state: ClusterState) -> int:
    """The pod's priority as admission sets it: ``spec.priority``, else its class, else default."""
    value = spec.get("priority")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    found = state.priority_classes.pod.get(str(spec.get("priorityClassName") or ""))
    return found[0] if found is not None else state.priority_classes.default_value()


def _queued_shapes(g: Group, state: ClusterState, defaults: PodDefaults) -> tuple[Mapping[str, int], ...]:
    """Pods of several shapes in the cycle's order; () when they are all of one shape (fast path)."""
    if not several_sizes(g, defaults):
        return ()
    shapes = [pod_requests(spec, g.spec_path, defaults) for spec in g.pod_specs]
    order = sorted(range(len(shapes)), key=lambda i: -pod_priority(g.pod_specs[i], state))
    return tuple(shapes[i] for i in order)


def _bound_domain(g: Group, state: ClusterState) -> str | None:
    """The domain the group's bound pods sit in (the scheduler confines the rest to it)."""
    if g.spec.key is None:
        return None
    return bound_domain({n.name: n.labels for n in state.nodes}, g.spec.key, g.members.nodes)
