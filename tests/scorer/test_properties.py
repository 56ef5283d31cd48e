"""Properties Kueue's placement has whatever the input, checked on the default (compiled) engine.

The differential tests prove the two engines agree; these prove that what they agree on makes
sense: an empty cluster is never worse than a busy one, more capacity never hurts a PodSet
placed on its own, and every assignment adds up and fits the hosts it names. Where Kueue's own
greedy algorithm is not monotone the property is restricted, and the counterexample is written
down (and pinned) below instead of being filtered away.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scorer import Cluster, View
from scorer.model import (
    HOSTNAME_LABEL,
    PODS,
    SCHEDULING_EFFECTS,
    Mode,
    Node,
    Placement,
    PodSetRequest,
    TopologyRequest,
)
from scorer.nodes import affinity_matches, first_untolerated, selector_matches
from tests.scorer.strategies import Scenario, gpu_scenarios, scenarios
from tests.scorer.strategies_extra import (
    Growth,
    growths,
    single_pod_set_scenarios,
    unique_host_scenarios,
)

PROPERTY_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)


def _build(case: Scenario, ns: Sequence[Node] | None = None) -> Cluster:
    return Cluster.build("default", case.levels, case.nodes if ns is None else ns)


def _views(cluster: Cluster) -> dict[str, View]:
    return {"now": cluster.now, "never": cluster.never}


# ---------------------------------------------------------------- never vs now


@PROPERTY_SETTINGS
@given(single_pod_set_scenarios())
def test_no_fit_on_the_empty_cluster_means_no_fit_now(case: Scenario) -> None:
    """``never`` is ``now`` with every node back, empty and free of condition taints.

    Generated with unique hostnames; the shared-hostname case that once broke it is pinned by
    ``test_shared_hostname_keeps_the_live_nodes_path_when_empty`` below.
    """
    cluster = _build(case)
    (never,) = cluster.never.place(case.pod_sets)
    (now,) = cluster.now.place(case.pod_sets)
    if not never.fits and not never.anomaly:
        assert not now.fits, (never.reason, now.assignment)


def test_shared_hostname_keeps_the_live_nodes_path_when_empty() -> None:
    """Leaves are keyed by hostname alone and take the first node's path. A cordoned node that
    shares a hostname with a live one in another rack once moved the leaf in ``never`` only:
    x1{rack r2, host h, cordoned}, x2{rack r1, host h, cpu 4}, y{rack r1, cpu 4}; 8 × 1 cpu at
    rack fitted now but "allows to fit only 4 out of 8" when empty."""
    from scorer import Cluster  # noqa: PLC0415
    from scorer.model import Mode, Node, PodSetRequest, TopologyRequest  # noqa: PLC0415

    levels = ("rack", "kubernetes.io/hostname")
    nodes = [
        Node(
            "x1", {"rack": "r2", "kubernetes.io/hostname": "h"}, {"cpu": 0, "pods": 110}, unschedulable=True
        ),
        Node("x2", {"rack": "r1", "kubernetes.io/hostname": "h"}, {"cpu": 4000, "pods": 110}),
        Node("y", {"rack": "r1", "kubernetes.io/hostname": "y"}, {"cpu": 4000, "pods": 110}),
    ]
    request = [PodSetRequest("p", 8, {"cpu": 1000}, TopologyRequest(Mode.REQUIRED, "rack"))]
    cluster = Cluster.build("t", levels, nodes)
    (now,) = cluster.now.place(request)
    (never,) = cluster.never.place(request)
    assert now.fits and never.fits, never.reason


# ---------------------------------------------------------------- more capacity


@st.composite
def _grown(draw: st.DrawFn, base: st.SearchStrategy[Scenario]) -> tuple[Scenario, Growth]:
    case = draw(base)
    return case, draw(growths(case.levels, case.nodes))


def _assert_still_fits(case: Scenario, growth: Growth) -> None:
    before = _build(case)
    after = _build(case, growth.apply(case.nodes))
    for name, view in _views(before).items():
        placed = view.place(case.pod_sets)
        replaced = _views(after)[name].place(case.pod_sets)
        for old, new in zip(placed, replaced, strict=True):
            if old.fits:
                assert new.fits, (name, growth.kind, old.assignment, new.reason)


@PROPERTY_SETTINGS
@given(_grown(single_pod_set_scenarios()))
def test_more_capacity_keeps_a_pod_set_fitting(grown: tuple[Scenario, Growth]) -> None:
    """One PodSet on its own: a new node, more allocatable or less usage never loses the fit.

    Holds for every mode, slices and multi-layer slices included (LeastFreeCapacity fits iff
    the total slice count suffices; BestFit fits iff one domain of the level holds it).
    """
    _assert_still_fits(*grown)


def _group_only(case: Scenario) -> Scenario:
    return Scenario(case.levels, case.nodes, tuple(p for p in case.pod_sets if p.topology.group is not None))


@PROPERTY_SETTINGS
@given(_grown(unique_host_scenarios().map(_group_only).filter(lambda c: len(c.pod_sets) == 2)))
def test_more_capacity_keeps_a_leader_worker_group_fitting(grown: tuple[Scenario, Growth]) -> None:
    """A leader+workers group placed on its own: the with-leader counts only grow with capacity."""
    _assert_still_fits(*grown)


def test_more_capacity_can_break_a_later_pod_set_of_the_same_workload() -> None:
    """Why the monotonicity properties stop at one PodSet (or one group): Kueue's own order.

    PodSets are placed one after the other with BestFit. Racks r1 {gpu: 5} and r2 {gpu: 8,
    cpu: 8}; PodSet ``a`` wants 4 × 1 gpu, ``b`` 8 × (1 gpu + 1 cpu), both required at rack.
    ``a`` takes r1 (the tightest fit) and ``b`` gets r2. Give r1 four more GPUs and r2 becomes
    the tightest fit for ``a``, which leaves ``b`` only 4 GPUs there: the workload no longer fits.
    (Per PodSet it is simpler still: a PodSet that did not fit takes nothing, and once more
    capacity lets it fit it takes what a later PodSet had; Hypothesis finds that one at once.)
    """
    gpu = "nvidia.com/gpu"
    levels = ("rack", HOSTNAME_LABEL)

    def host(name: str, rack: str, **alloc: int) -> Node:
        return Node(name, {"rack": rack, HOSTNAME_LABEL: name}, {"pods": 110, **alloc})

    pod_sets = (
        PodSetRequest("a", 4, {gpu: 1}, TopologyRequest(Mode.REQUIRED, "rack")),
        PodSetRequest("b", 8, {gpu: 1, "cpu": 1000}, TopologyRequest(Mode.REQUIRED, "rack")),
    )
    r2 = host("h2", "r2", cpu=8000, **{gpu: 8})
    small = Cluster.build("default", levels, [host("h1", "r1", **{gpu: 5}), r2]).now.place(pod_sets)
    big = Cluster.build("default", levels, [host("h1", "r1", **{gpu: 9}), r2]).now.place(pod_sets)
    assert [p.fits for p in small] == [True, True]
    assert small[0].assignment is not None and small[0].assignment.domains[0].values == ("h1",)
    assert [p.fits for p in big] == [True, False]
    assert big[0].assignment is not None and big[0].assignment.domains[0].values == ("h2",)
    assert big[1].reason == (
        'topology "default" allows to fit only 4 out of 8 pod(s). Total nodes: 2; excluded: resource "cpu": 1'
    )


# ---------------------------------------------------------------- assignments add up


def _leaf_key(levels: tuple[str, ...], labels: dict[str, str] | Sequence[str]) -> object:
    if levels[-1] == HOSTNAME_LABEL:
        return labels[HOSTNAME_LABEL] if isinstance(labels, dict) else labels[-1]
    if isinstance(labels, dict):
        return tuple(labels[lvl] for lvl in levels)
    return tuple(labels)


def _view_nodes(case: Scenario, view: str) -> list[Node]:
    """The nodes a view holds, in the order leaves take their first node from: in ``never``
    schedulable nodes come first, so a shared hostname keeps the path ``now`` sees."""
    if view == "never":
        return sorted(case.nodes, key=lambda n: not n.schedulable_now)
    return [n for n in case.nodes if n.schedulable_now]


def _free_by_leaf(case: Scenario, view: str) -> dict[object, dict[str, int]]:
    """What each leaf offers, worked out from the nodes alone (not from the scorer's arrays)."""
    free: dict[object, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for node in _view_nodes(case, view):
        leaf = free[_leaf_key(case.levels, dict(node.labels))]
        for r, amount in node.allocatable.items():
            leaf[r] += amount - (node.usage.get(r, 0) if view == "now" else 0)
    return free


def _per_pod(p: PodSetRequest) -> dict[str, int]:
    out = {r: v for r, v in p.requests.items() if v}
    out[PODS] = out.get(PODS, 0) + 1
    return out


def _check_host_filters(case: Scenario, view: str, p: PodSetRequest, host: str) -> None:
    """The first node of a host leaf (Kueue's node) passes the PodSet's taint and label checks."""
    node = next(n for n in _view_nodes(case, view) if n.labels[HOSTNAME_LABEL] == host)
    taints = [
        t for t in node.taints if t.effect in SCHEDULING_EFFECTS and not (view == "never" and t.is_condition)
    ]
    assert first_untolerated(taints, p.tolerations) is None, (host, node.taints)
    assert selector_matches(node, p.node_selector), (host, node.labels)
    assert p.affinity is None or affinity_matches(node, p.affinity), (host, node.labels)


def _slice_size(p: PodSetRequest) -> int:
    if p.topology.slice_layers:
        return p.topology.slice_layers[0].size
    if p.topology.slice_level is not None and p.topology.slice_size:
        return p.topology.slice_size
    return 1


def _expected_totals(pod_sets: Sequence[PodSetRequest]) -> dict[str, tuple[int, int]]:
    """Per PodSet: the pods its assignment holds, and the ``total_count`` it reports.

    Kueue places ``count // slice_size`` slices, so a count that is not a multiple of the slice
    size fits with the remainder left out (Kueue's webhook checks only ``size <= count``).
    Kueue's ``findLeaderAndWorkers``: of a group's two PodSets the second is the leader unless
    its count is larger, and a leader always gets exactly one pod, whatever its own count says
    (a group of ``leader{count: 1}`` and ``workers{count: 0}`` places one pod for ``workers``).
    """
    totals = {p.name: (p.count // _slice_size(p) * _slice_size(p), p.count) for p in pod_sets}
    groups: dict[str, list[PodSetRequest]] = defaultdict(list)
    for p in pod_sets:
        if p.topology.group is not None:
            groups[p.topology.group].append(p)
    for members in groups.values():
        if len(members) == 2:
            workers, leader = members
            if leader.count > workers.count:
                workers, leader = leader, workers
            totals[leader.name] = (1, 1)
    return totals


def _assert_assignments_fit(case: Scenario, view: str, placements: Sequence[Placement]) -> None:
    free = _free_by_leaf(case, view)
    used: dict[object, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    requests = {p.name: p for p in case.pod_sets}
    totals = _expected_totals(case.pod_sets)
    hostname_leaves = case.levels[-1] == HOSTNAME_LABEL
    for placement in placements:
        if not placement.fits:
            assert placement.assignment is None
            continue
        request = requests[placement.name]
        assignment = placement.assignment
        assert assignment is not None and not placement.anomaly
        assert assignment.levels == ((HOSTNAME_LABEL,) if hostname_leaves else case.levels)
        counts = [d.count for d in assignment.domains]
        assert (sum(counts), placement.total_count) == totals[placement.name], counts
        assert all(c > 0 for c in counts), counts
        keys = [_leaf_key(case.levels, d.values) for d in assignment.domains]
        assert len(set(keys)) == len(keys), keys
        for key, n in zip(keys, counts, strict=True):
            assert key in free, key
            for r, v in _per_pod(request).items():
                used[key][r] += n * v
                assert used[key][r] <= free[key].get(r, 0), (view, placement.name, key, r, dict(used[key]))
            if hostname_leaves and request.topology.group is None:
                _check_host_filters(case, view, request, str(key))


@PROPERTY_SETTINGS
@given(st.one_of(scenarios(), gpu_scenarios()))
def test_assignments_add_up_and_fit_the_hosts(case: Scenario) -> None:
    """Counts sum to the PodSet's count, and PodSets placed in order never overfill a leaf.

    Checked cumulatively over the workload's PodSets (leaders and workers included) against
    capacity computed from the nodes directly: allocatable − usage of Ready, uncordoned nodes
    for ``now``, allocatable of every node for ``never``; a leaf that is not a host sums its
    nodes. Ungrouped PodSets on host leaves must also pass that host's taints and selectors.
    """
    cluster = _build(case)
    for view_name, view in _views(cluster).items():
        placements = view.place(case.pod_sets)
        assert [p.name for p in placements] == [p.name for p in case.pod_sets]
        _assert_assignments_fit(case, view_name, placements)
