"""Which left-out object a verdict would depend on: then the workload is not judged.

A malformed object is left out of the state alone (`state.rejected`); a workload whose verdict
reads it must not be judged as if it did not exist ("LocalQueue not found", no TAS, no
LimitRange defaults): it is answered ``object-rejected``, naming the object, and the server
answers it as it answers an unavailable state (``--on-timeout``). What it depends on: its
namespace (policy rules select by its labels) and the namespace's LimitRanges (request
defaults), each RuntimeClass its templates name (overhead), a TrainJob's runtime, and the queue
chain LocalQueue → ClusterQueue → every ResourceFlavor → its Topology (or the policy's default
Topology when it names one). An object that is in the state is what the verdict reads, even if
a second copy of it was rejected.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from webhook.decide.policy import DefaultTopology
from webhook.model.workloads.base import WorkloadPodSets
from webhook.state.cluster import ClusterState
from webhook.state.rejected import Rejected

Key = tuple[str, str, str]  # (kind, namespace, name)


def left_out(
    state: ClusterState,
    namespace: str,
    queue: str | None,
    default: DefaultTopology | None,
    workload: WorkloadPodSets,
) -> Rejected | None:
    """The first rejected object the verdict on ``workload`` depends on, if any."""
    if not state.rejected:
        return None  # the usual case, at no cost
    for kind, ns, name in _dependencies(state, namespace, queue, default, workload):
        found = state.rejected_object(kind, ns, name)
        if found is not None:
            return found
    return state.rejected_in("LimitRange", namespace)


def _dependencies(
    state: ClusterState,
    namespace: str,
    queue: str | None,
    default: DefaultTopology | None,
    workload: WorkloadPodSets,
) -> Iterator[Key]:
    """The objects the verdict reads that are missing from the state."""
    if namespace not in state.namespaces:
        yield ("Namespace", "", namespace)
    if workload.runtime is not None and workload.runtime not in state.runtimes:
        yield workload.runtime
    for pod_set in workload.pod_sets:
        spec = pod_set.template.get("spec")
        runtime_class = spec.get("runtimeClassName") if isinstance(spec, Mapping) else None
        if isinstance(runtime_class, str) and runtime_class not in state.overheads:
            yield ("RuntimeClass", "", runtime_class)
    if queue:
        yield from _queue_chain(state, namespace, queue)
    elif default is not None and not default.levels and default.name not in state.topologies:
        yield ("Topology", "", default.name)


def _queue_chain(state: ClusterState, namespace: str, queue: str) -> Iterator[Key]:
    lq = state.local_queues.get((namespace, queue))
    if lq is None:
        yield ("LocalQueue", namespace, queue)
        return
    cq = state.cluster_queues.get(lq.cluster_queue)
    if cq is None:
        yield ("ClusterQueue", "", lq.cluster_queue)
        return
    for name in cq.flavors:
        flavor = state.flavors.get(name)
        if flavor is None:
            yield ("ResourceFlavor", "", name)
        elif flavor.topology_name and flavor.topology_name not in state.topologies:
            yield ("Topology", "", flavor.topology_name)
