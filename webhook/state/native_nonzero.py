"""What the kube-scheduler counts for a bound pod beyond its requests: ``NonZeroRequested``.

The native placement score (``NodeResourcesFit.ScorePlacement``, MostAllocated over cpu and
memory) reads each node's ``NonZeroRequested`` (``resource_allocation.go``
``calculateResourceAllocatableRequest``: ``useRequested`` is false for the placement scorer), not
its plain requests. A node full of best-effort agents is thus a little fuller to the scheduler
than their requests say, and that can decide between two domains otherwise equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.model.podrequests import stored_pod_requests
from webhook.wire.errors import InvalidObject

# schedutil.DefaultMilliCPURequest / DefaultMemoryRequest: what a container stating no cpu or
# memory request counts as.
NON_ZERO = {"cpu": "100m", "memory": "200Mi"}


def nonzero_extra(spec: Mapping[str, Any]) -> tuple[int, int]:
    """(milli-cpu, memory bytes) the kube-scheduler counts for a pod beyond its requests.

    ``PodInfo.CalculateResource`` (v1.36.5 ``pkg/scheduler/framework/types.go``) sums a pod's
    requests again with ``NonMissingContainerRequests`` (``getNonMissingContainerRequests``):
    every container and init container whose requests lack the ``cpu`` (``memory``) key counts
    100m (200Mi) of it (``applyNonMissing``); a request set to zero stays zero, and a pod-level
    request (KEP-2837) stands. A pod asking for cpu and memory in every container adds nothing;
    a best-effort pod adds 100m / 200Mi. A spec that does not parse adds nothing (its usage is
    the state's business).
    """
    resources = spec.get("resources")
    pod_level = resources.get("requests") if isinstance(resources, Mapping) else None
    missing = [r for r in NON_ZERO if not (isinstance(pod_level, Mapping) and r in pod_level)]
    filled: dict[str, Any] = dict(spec)
    changed = False
    for kind in ("containers", "initContainers"):
        items = spec.get(kind)
        if isinstance(items, list):
            filled[kind] = [_filled(c, missing) for c in items]
            changed = changed or filled[kind] != items
    if not changed:
        return (0, 0)
    try:
        before = stored_pod_requests(spec, "spec")
        after = stored_pod_requests(filled, "spec")
    except InvalidObject:
        return (0, 0)
    return (after.get("cpu", 0) - before.get("cpu", 0), after.get("memory", 0) - before.get("memory", 0))


def _filled(container: Any, missing: list[str]) -> Any:
    """The container with ``NON_ZERO`` requests for those of ``missing`` it states none of."""
    if not isinstance(container, Mapping):
        return container
    resources = container.get("resources") or {}
    requests = (resources.get("requests") or {}) if isinstance(resources, Mapping) else None
    if not isinstance(requests, Mapping):
        return container
    add = {r: NON_ZERO[r] for r in missing if r not in requests}
    if not add:
        return container
    return {**container, "resources": {**resources, "requests": {**requests, **add}}}
