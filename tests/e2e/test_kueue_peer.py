"""tasgate's placement equals Kueue's own, computed by Kueue v0.19.2's Go code, on random clusters.

The peer (bench/kueue_peer, built by ``bash bench/kueue_peer/build.sh``, which ``make e2e`` runs
first) feeds the same nodes, usage and PodSets to Kueue's TAS cache, snapshot build and
``FindTopologyAssignmentsForFlavor``. Every PodSet Kueue looks at must get the same outcome from
tasgate: the same assignment (levels, domains, counts, in Kueue's order), or the same failure
message word for word (which carries the fit count and the exclusion figures), or both must be
Kueue's "code assumptions violated" case. tasgate's ``never`` view (every node back, empty,
condition taints gone) is checked against Kueue given exactly that cluster.

The clusters are the scorer's own Hypothesis strategies (tests/scorer/strategies.py: small
alphabets, so ties and shared domains are common) plus seeded GPU clusters of a few hundred
nodes. What the generators leave out, and why:

- two nodes with one ``kubernetes.io/hostname``: Kueue keeps the first node it meets as the
  leaf, and it meets them in Go map order (random per run), so no fixed answer exists to match
  (``unique_host_scenarios`` gives every node its own hostname);
- more than two PodSets in one podset group and non-positive slice sizes: Kueue's workload
  webhook rejects both before any placement (the strategies never draw them);
- a node affinity ``Exists`` / ``DoesNotExist`` requirement with values: the API server rejects
  such a pod template, so no Job carries one (Kueue would fail it with "invalid affinity node
  selectors", tasgate ignores the values); `admissible` empties those values;
- slice annotations on a PodSet of a podset group: Kueue v0.19.2's job webhook refuses them
  ("may not be set when 'kueue.x-k8s.io/podset-slice-size' is specified", TASGroupedPodSetSlicing
  is not in this release) and so does tasgate's port of it (webhook/rules/kueue.py), so the
  scorer never places one; `admissible` drops them. (Kept in, they only showed the leader bug
  below: below the slice level Kueue orders hosts by pod count ascending, so the first
  leader-capable host is often one with no room for workers.)

One disagreement is known and kept in view, not hidden: where the leader of a podset group goes
when placing it costs a host workers (`LEADER_BUG`, strict xfail on an exhaustive grid of small
racks: it fails the day the scorer is fixed, and the mark must go).
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import kueue_peer
from scorer import Cluster
from scorer.model import HOSTNAME_LABEL, Mode, Node, PodSetRequest, Taint, Toleration, TopologyRequest
from tests.scorer.strategies import TOLERATIONS, Scenario
from tests.scorer.strategies_extra import unique_host_scenarios

pytestmark = pytest.mark.e2e

GPU = "nvidia.com/gpu"


@pytest.fixture(scope="module")
def peer() -> Any:
    """The peer binary; a missing one is an error here, never a skip (make e2e builds it)."""
    return kueue_peer.peer_binary()


@dataclasses.dataclass(frozen=True)
class Flavor:
    node_labels: dict[str, str]
    tolerations: tuple[Toleration, ...]


FLAVORS = st.builds(
    Flavor,
    st.sampled_from([{}, {}, {"pool": "a"}]),
    st.lists(st.sampled_from(TOLERATIONS), max_size=1).map(tuple),
)


def never_nodes(nodes: Sequence[Node]) -> list[Node]:
    """tasgate's ``never`` view as a cluster Kueue can be given: every node Ready, uncordoned,
    empty, without the node.kubernetes.io/* condition taints."""
    return [
        dataclasses.replace(
            n,
            ready=True,
            unschedulable=False,
            usage={},
            taints=tuple(t for t in n.taints if not t.is_condition),
        )
        for n in nodes
    ]


@dataclasses.dataclass(frozen=True)
class Case:
    levels: tuple[str, ...]
    nodes: tuple[Node, ...]
    workloads: dict[str, tuple[PodSetRequest, ...]]
    flavor: Flavor


def documents(case: Case) -> list[dict[str, Any]]:
    """The peer's input for both views of one case: ``now`` as is, ``never`` as `never_nodes`."""
    f = case.flavor
    return [
        kueue_peer.document(
            kueue_peer.cluster_document(case.levels, ns, "default", f.node_labels, f.tolerations),
            case.workloads,
        )
        for ns in (case.nodes, never_nodes(case.nodes))
    ]


def check(cases: Sequence[Case], peer: Any, seen: Counter[str] | None = None) -> list[str]:
    """Every case, both views, in one peer run; the disagreements, as readable lines. ``seen``
    counts Kueue's outcomes by kind (so a test can show it compared fits and failures alike)."""
    answers = iter(kueue_peer.run([d for case in cases for d in documents(case)], peer))
    out = []
    for index, case in enumerate(cases):
        f = case.flavor
        cluster = Cluster.build("default", case.levels, case.nodes, f.node_labels, f.tolerations)
        for view_name, view in (("now", cluster.now), ("never", cluster.never)):
            answer = next(answers)
            for w, (name, pod_sets) in enumerate(case.workloads.items()):
                ours = kueue_peer.tasgate_outcomes(view.place(pod_sets))
                theirs = kueue_peer.kueue_outcomes(answer["workloads"][w], pod_sets)
                if seen is not None:
                    seen.update(o.kind for o in theirs)
                lines = kueue_peer.differences(ours, theirs)
                out += [f"case {index} {view_name} {name}: {line}" for line in lines]
    return out


def reproducer(case: Case) -> str:
    return (
        f"levels={case.levels!r}\nflavor={case.flavor!r}\nnodes={case.nodes!r}\nworkloads={case.workloads!r}"
    )


def admissible(p: PodSetRequest) -> PodSetRequest:
    """The PodSet as the API server and Kueue's webhook would have let it through (see the
    module docstring): no values on Exists/DoesNotExist, no slices in a podset group."""
    if p.topology.group is not None:
        p = dataclasses.replace(
            p, topology=dataclasses.replace(p.topology, slice_level=None, slice_size=None, slice_layers=())
        )
    if p.affinity is None:
        return p
    terms = tuple(
        dataclasses.replace(
            t,
            match_expressions=tuple(
                dataclasses.replace(r, values=()) if r.operator in ("Exists", "DoesNotExist") else r
                for r in t.match_expressions
            ),
        )
        for t in p.affinity
    )
    return dataclasses.replace(p, affinity=terms)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=unique_host_scenarios(), flavor=FLAVORS)
def test_placement_equals_kueue_on_random_clusters(peer: Any, case: Scenario, flavor: Flavor) -> None:
    one = Case(case.levels, case.nodes, {"w": tuple(admissible(p) for p in case.pod_sets)}, flavor)
    diffs = check([one], peer)
    assert not diffs, "\n".join([*diffs, reproducer(one)])


# ---- seeded GPU clusters of a few hundred nodes: gangs, leaders and slices at scale ------------

LEVELS = ("block", "rack", HOSTNAME_LABEL)
MAINTENANCE = Taint("maintenance", "NoSchedule")
NOT_READY = Taint("node.kubernetes.io/not-ready", "NoExecute")


def gpu_cluster(rng: random.Random) -> list[Node]:
    """Blocks of racks of 8-GPU hosts, racks of uneven size, some used, tainted, away."""
    nodes = []
    hosts_per_rack = rng.choice([2, 4, 8, 16])
    for i in range(rng.randint(8, 300)):
        rack = i // (hosts_per_rack + rng.randint(0, 2))
        labels = {"block": f"b{rack // 4}", "rack": f"b{rack // 4}-r{rack % 4}", HOSTNAME_LABEL: f"h{i:03d}"}
        gpus = rng.choice([8, 8, 8, 4])
        used = rng.choice([0, 0, 0, 1, 2, 4, gpus])
        usage = {GPU: used, "cpu": used * 4000, "pods": used and rng.randint(1, 3)} if used else {}
        taint = rng.choice([(), (), (), (), (), (MAINTENANCE,), (NOT_READY,)])
        nodes.append(
            Node(
                labels[HOSTNAME_LABEL],
                labels,
                {GPU: gpus, "cpu": 64000, "memory": 2**40, "pods": 110},
                taints=taint,
                ready=rng.random() > 0.03,
                unschedulable=rng.random() < 0.03,
                usage=usage,
            )
        )
    return nodes


def gang(rng: random.Random) -> tuple[PodSetRequest, ...]:
    """One workload: a required/preferred/unconstrained gang, maybe sliced, maybe with a leader,
    now and then asking for a resource no node has."""
    mode = rng.choice([Mode.REQUIRED, Mode.REQUIRED, Mode.PREFERRED, Mode.UNCONSTRAINED, Mode.IMPLIED])
    level = rng.choice(["block", "rack", HOSTNAME_LABEL]) if mode in (Mode.REQUIRED, Mode.PREFERRED) else None
    size = rng.choice([1, 1, 2, 4, 8])
    slice_level = rng.choice(["rack", HOSTNAME_LABEL]) if size > 1 else None
    if slice_level and level and LEVELS.index(slice_level) < LEVELS.index(level):
        slice_level = level
    leader = rng.random() < 0.3 and mode in (Mode.REQUIRED, Mode.PREFERRED)
    group = "g" if leader else None
    if leader:  # Kueue's webhook refuses slices in a podset group (module docstring)
        size, slice_level = 1, None
    workers = PodSetRequest(
        "workers",
        size * rng.randint(1, 24),
        {
            GPU: rng.choice([1, 2, 4, 8]),
            "cpu": 4000,
            **({"example.com/fpga": 1} if rng.random() < 0.05 else {}),
        },
        TopologyRequest(mode, level, slice_level, size if slice_level else None, group=group),
        tolerations=(Toleration("maintenance", "Exists"),) if rng.random() < 0.2 else (),
    )
    if not leader:
        return (workers,)
    head = PodSetRequest(
        "leader", 1, {"cpu": rng.choice([1000, 60000])}, TopologyRequest(mode, level, group="g")
    )
    return (head, workers)


def test_placement_equals_kueue_on_seeded_gpu_clusters(peer: Any) -> None:
    """200 clusters, three workloads each, in one peer run per view; every disagreement listed."""
    rng = random.Random(20261202)
    cases = [
        Case(LEVELS, tuple(gpu_cluster(rng)), {f"w{w}": gang(rng) for w in range(3)}, Flavor({}, ()))
        for _ in range(200)
    ]
    seen: Counter[str] = Counter()
    found = check(cases, peer, seen)
    assert not found, "\n".join(found[:20])
    # Not vacuous: both placements and Kueue's failure messages were compared, many times.
    assert seen["fit"] >= 300 and seen["no-fit"] >= 300, seen


# ---- every small leader + workers rack: where a leader costs workers -------------------------
# Found a scorer bug on 2026-12-02 (fixed the same day): with a podset group, Kueue v0.19.2 puts the
# leader on the first domain prioritizeLeaderDomain keeps and best-fits only when that domain alone
# completes the group (consumeWithLeadersGeneric); tasgate best-fitted among every eligible domain.
# Smallest case: one rack, hosts a (2 GPUs, cpu 16) and b (2 GPUs, cpu 32), leader cpu 8 + 2 workers
# x (1 GPU, cpu 8), required rack: Kueue puts the leader on a, workers a=1 b=1.


def leader_grid() -> list[Case]:
    """Two hosts in one rack, GPUs and cpu from small sets, a leader whose cpu may cost the
    host workers: 1,215 groups, exhaustively (the random strategies' leaders are too small to
    cost a worker, so they seldom reach this)."""
    out = []
    grid = itertools.product(
        [2, 4, 8],
        [16000, 32000, 64000],
        [2, 4, 8],
        [16000, 32000, 64000],
        [8000, 16000, 32000],
        [1, 2, 3, 4, 6],
    )
    for gpu_a, cpu_a, gpu_b, cpu_b, leader_cpu, workers in grid:
        nodes = tuple(
            Node(name, {"rack": "r0", HOSTNAME_LABEL: name}, {"cpu": cpu, GPU: gpus, "pods": 110})
            for name, gpus, cpu in (("a", gpu_a, cpu_a), ("b", gpu_b, cpu_b))
        )
        group = (
            PodSetRequest(
                "leader", 1, {"cpu": leader_cpu}, TopologyRequest(Mode.REQUIRED, "rack", group="g")
            ),
            PodSetRequest(
                "workers", workers, {GPU: 1, "cpu": 8000}, TopologyRequest(Mode.REQUIRED, "rack", group="g")
            ),
        )
        out.append(Case(("rack", HOSTNAME_LABEL), nodes, {"w": group}, Flavor({}, ())))
    return out


def test_leader_placement_equals_kueue_on_every_small_rack(peer: Any) -> None:
    found = check(leader_grid(), peer)
    assert not found, f"{len(found)} disagreements, e.g.\n" + "\n".join(found[:4])
