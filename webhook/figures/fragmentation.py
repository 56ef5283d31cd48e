"""Fragmentation: free accelerators per domain, and how many gangs of the policy's shapes fit now.

Kueue users ask "how many 8 x 8-GPU gangs can start right now, and where?" (kueue#10505) and a
free-GPU sum cannot answer it: a node with 3 free GPUs holds no 8-GPU pod. So every *fit* figure
here comes from the placement engine itself, on the flavor's ``now`` view, for a shape's pod
(``gpusPerPod`` of the flavor's accelerator, one ``pods`` unit): the engine's per-level table gives,
in one run per shape, the most pods one domain of each level holds and how many domains hold the
whole gang, exactly as Kueue's TAS counts them. Per-domain fits (for the picture) are the same
run on the view with every leaf outside the domain emptied. Free and total accelerators are plain
sums of the views' capacity arrays: what is there, not what fits.

A shape's pods count as `check` counts a workload of that shape (``host_marks``): a host
tainted for some pods only holds none of them, and is marked, as NotReady and cordoned hosts are.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from scorer import Cluster, View, default_engine
from scorer.model import Mode, PodSetRequest, Toleration, TopologyRequest
from scorer.tree import Tree
from webhook.decide.policy import GangShape, Policy
from webhook.figures.host_marks import Marks, host_marks, shape_tolerations
from webhook.state.cluster import ClusterState
from webhook.state.kueue import Flavor, Topology

# Per-domain fits cost one engine run per domain and shape: the picture asks for them only up
# to this many domains per flavor (a picture of more boxes is no longer readable anyway).
MAX_DOMAIN_RUNS = 512


@dataclass(frozen=True, slots=True)
class ShapeCount:
    """How many pods and whole gangs of one shape a domain holds now."""

    shape: GangShape
    pods: int

    @property
    def gangs(self) -> int:
        return self.pods // self.shape.pods


@dataclass(frozen=True, slots=True)
class DomainFigure:
    """One domain's accelerators: ``total`` on every node of the flavor, ``free`` now, ``used`` by
    bound pods, ``unavailable`` on nodes Kueue does not count now (NotReady, cordoned), ``tainted``
    on nodes it counts whose taints keep the shapes' pods off; a host's ``marks`` say why it is
    unavailable or tainted ("cordoned", "not ready", "tainted k=v:NoSchedule")."""

    level: str
    path: tuple[str, ...]
    total: int
    free: int
    used: int
    unavailable: int
    shapes: tuple[ShapeCount, ...] = ()  # filled only when per-domain fits were asked for
    tainted: int = 0
    marks: tuple[str, ...] = ()

    @property
    def domain_id(self) -> str:
        """Kueue's DomainID: the level values joined by commas."""
        return ",".join(self.path)


@dataclass(frozen=True, slots=True)
class ShapeFigure:
    """One shape at one level: whole gangs in the best single domain, and domains holding one."""

    level: str
    shape: GangShape
    best_gangs: int
    best_pods: int
    domains: int
    best_domain: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class FlavorFigures:
    """Every figure of one TAS flavor. ``accelerator`` is the resource the shapes ask for ("" when
    no node of the flavor has any of the policy's GPU resources: then there are no shape figures)."""

    topology: str
    flavor: str
    levels: tuple[str, ...]
    hostname_leaves: bool
    accelerator: str
    domains: tuple[DomainFigure, ...]
    shapes: tuple[ShapeFigure, ...]
    notes: tuple[str, ...] = ()  # why figures are missing: no accelerators, no node up, too many domains

    def at_level(self, level: str) -> tuple[DomainFigure, ...]:
        return tuple(d for d in self.domains if d.level == level)

    def is_host_level(self, level: str) -> bool:
        return self.hostname_leaves and level == self.levels[-1]


def cluster_figures(
    state: ClusterState, policy: Policy, per_domain: bool = False
) -> tuple[FlavorFigures, ...]:
    """The figures of every TAS flavor whose Topology exists, by flavor name."""
    out = []
    for flavor, topology in tas_flavors(state):
        cluster = state.flavor_snapshot(flavor, topology)
        gpus, shapes = policy.gpu_resources, policy.gang_shapes
        out.append(flavor_figures(cluster, topology.name, flavor.name, gpus, shapes, per_domain))
    return tuple(out)


def tas_flavors(state: ClusterState) -> Iterator[tuple[Flavor, Topology]]:
    """Each TAS flavor with its Topology, in flavor-name order (flavors without one are left out)."""
    for name in sorted(state.flavors):
        flavor = state.flavors[name]
        topology = state.topologies.get(flavor.topology_name or "")
        if topology is not None and topology.levels:
            yield flavor, topology


def flavor_figures(
    cluster: Cluster,
    topology: str,
    flavor: str,
    gpu_resources: Sequence[str],
    shapes: Sequence[GangShape],
    per_domain: bool = False,
    hosts: bool = True,
) -> FlavorFigures:
    """``per_domain``: each domain's fits too (one engine run per domain and pod size);
    ``hosts``: a hostname level's domains too (the picture draws them, /metrics has no use)."""
    now, never = cluster.now, cluster.never
    present = [r for r in gpu_resources if _has(never.tree, r)]
    accelerator = present[0] if present else ""
    runnable = accelerator != "" and now.tree.n_leaves > 0
    notes = []
    if not accelerator:
        notes.append(f"no gang-shape figures: no node of this flavor has {' or '.join(gpu_resources)}")
    elif not runnable:
        notes.append("no gang fits: no node of this flavor is Ready and uncordoned now")
    counting = per_domain and runnable
    if counting and never.tree.level_offsets[-2] > MAX_DOMAIN_RUNS:
        counting = False
        notes.append(f"per-domain fits left out: more than {MAX_DOMAIN_RUNS} domains")
    tolerated = shape_tolerations(cluster.nodes, accelerator)
    away = cluster.away_counts() != (0, 0)
    marks = host_marks(never, (*tolerated, *now.flavor_tolerations), present, away)
    requests = [shape_request(now, accelerator, s, tolerated) for s in (shapes if counting else ())]
    domains = _domain_figures(now, never, present, requests, shapes, hosts, marks)
    return FlavorFigures(
        topology,
        flavor,
        never.tree.levels,
        never.tree.hostname_leaves,
        accelerator,
        domains,
        _shape_figures(now, accelerator, shapes, tolerated) if runnable else (),
        tuple(notes),
    )


def _shape_figures(
    now: View, accelerator: str, shapes: Sequence[GangShape], tolerated: tuple[Toleration, ...]
) -> tuple[ShapeFigure, ...]:
    """One engine run per shape; its per-level table is every level's figure."""
    out = []
    for shape in shapes:
        (placement,) = now.place([shape_request(now, accelerator, shape, tolerated)], default_engine())
        for row in placement.levels:
            gangs = row.max_pods // shape.pods
            out.append(
                ShapeFigure(row.level, shape, gangs, row.max_pods, row.fitting_domains, row.best_domain)
            )
    return tuple(out)


def _has(tree: Tree, resource: str) -> bool:
    return tree.resource_column(resource) >= 0


def shape_request(
    view: View, accelerator: str, shape: GangShape, tolerations: tuple[Toleration, ...] = ()
) -> PodSetRequest:
    """A shape's gang as Kueue would see it: required at the top level (the engine's per-level
    table covers every level whatever is asked), with ``shape_tolerations``."""
    return PodSetRequest(
        name=shape.text,
        count=shape.pods,
        requests={accelerator: shape.gpus_per_pod},
        topology=TopologyRequest(Mode.REQUIRED, level=view.tree.levels[0]),
        tolerations=tolerations,
    )


def _domain_figures(
    now: View,
    never: View,
    resources: Sequence[str],
    requests: Sequence[PodSetRequest],
    shapes: Sequence[GangShape],
    hosts: bool,
    marked: Marks,
) -> tuple[DomainFigure, ...]:
    totals = domain_sums(never.tree, never.tree.capacity, resources)
    capacity_now = domain_sums(now.tree, now.tree.capacity, resources)
    free_now = domain_sums(now.tree, now.free, resources)
    index_now = {path: d for d, path in enumerate(now.tree.paths)}
    marks, tainted = marked
    out = []
    tree = never.tree
    host_level = len(tree.levels) - 1 if tree.hostname_leaves else -1
    for level, name in enumerate(tree.levels):
        if level == host_level and not hosts:
            continue
        for d in range(tree.level_offsets[level], tree.level_offsets[level + 1]):
            path = tree.paths[d]
            total, cap, free = totals[path], capacity_now.get(path, 0), free_now.get(path, 0)
            d_now = index_now.get(path)
            counts: tuple[ShapeCount, ...] = ()
            if requests and d_now is not None and level != host_level:
                counts = _domain_counts(now, d_now, level, requests, shapes)
            used, away = max(cap - free, 0), total - cap
            figure = DomainFigure(
                name, path, total, free, used, away, counts, tainted.get(path, 0), marks.get(path, ())
            )
            out.append(figure)
    return tuple(out)


def _domain_counts(
    view: View, domain: int, level: int, requests: Sequence[PodSetRequest], shapes: Sequence[GangShape]
) -> tuple[ShapeCount, ...]:
    """The engine on the view with every leaf outside ``domain`` emptied: its level row is the domain.

    How many pods a domain holds depends only on the per-pod request, so shapes that share
    ``gpusPerPod`` share one run.
    """
    tree = view.tree
    leaves = tree.leaf_range(tree.paths[domain])  # contiguous, since children are
    first, last = leaves.start, leaves.stop
    width = len(tree.resources)
    masked = array("q", bytes(8 * len(view.free)))
    masked[first * width : last * width] = view.free[first * width : last * width]
    alone = View(
        view.topology_name, tree, masked, view.flavor_tolerations, default_engine(), view.label_cache
    )
    pods: dict[int, int] = {}
    for shape, request in zip(shapes, requests, strict=True):
        if shape.gpus_per_pod not in pods:
            pods[shape.gpus_per_pod] = alone.place([request])[0].levels[level].max_pods
    return tuple(ShapeCount(shape, pods[shape.gpus_per_pod]) for shape in shapes)


def domain_sums(tree: Tree, amounts: array[int], resources: Sequence[str]) -> dict[tuple[str, ...], int]:
    """Per domain path, the named resources summed over its leaves (negatives, overcommit, as 0).

    Leaves first, then rolled up child to parent: domains are indexed level by level, so every
    child comes after its parent and one backward pass adds each into its parent.
    """
    cols = [c for c in (tree.resource_column(r) for r in resources) if c >= 0]
    width, leaf0 = len(tree.resources), tree.leaf_offset
    sums = [0] * len(tree.paths)
    for leaf in range(tree.n_leaves):
        base = leaf * width
        sums[leaf0 + leaf] = sum(max(amounts[base + c], 0) for c in cols)
    parent = tree.parent
    for d in range(len(sums) - 1, -1, -1):
        if parent[d] >= 0:
            sums[parent[d]] += sums[d]
    return dict(zip(tree.paths, sums, strict=True))
