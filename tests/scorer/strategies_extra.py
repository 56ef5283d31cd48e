"""More Hypothesis strategies for the property tests: single PodSets, unique hosts, capacity growth.

Built on `tests.scorer.strategies` (whose strategies stay as they are). Hostnames are made
unique here on purpose: two nodes sharing a ``kubernetes.io/hostname`` label become one leaf
keyed by the first node's path and taints, so a change to either node moves capacity between
domains, which no real cluster does and which no monotonicity property can survive.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from hypothesis import strategies as st

from scorer.model import HOSTNAME_LABEL, Node, PodSetRequest
from tests.scorer.strategies import (
    RESOURCES,
    TAINTS,
    Scenario,
    gpu_scenarios,
    levels,
    nodes,
    pod_set,
    scenarios,
)


def with_unique_hosts(ns: tuple[Node, ...]) -> tuple[Node, ...]:
    """The same nodes, each with its own hostname (``n<index>``)."""
    return tuple(
        dataclasses.replace(n, labels={**n.labels, HOSTNAME_LABEL: f"n{i}"}) for i, n in enumerate(ns)
    )


def first_group(pod_sets: tuple[PodSetRequest, ...]) -> tuple[PodSetRequest, ...]:
    """The first group of PodSets `scenarios()` / `gpu_scenarios()` draw: a leader and its
    workers when the first PodSet names a group (both strategies draw such a pair first), else
    the first PodSet alone. Either way `scorer.snapshot.one_group` finds one group in it."""
    return pod_sets[:2] if pod_sets[0].topology.group is not None else pod_sets[:1]


def all_schedulable(ns: tuple[Node, ...]) -> tuple[Node, ...]:
    """The same nodes, each Ready, uncordoned and without condition taints: no node is away, so
    a cluster's "now" and "never" views share one tree (`View.shares_plans_with`)."""
    return tuple(
        dataclasses.replace(
            n, ready=True, unschedulable=False, taints=tuple(t for t in n.taints if not t.is_condition)
        )
        for n in ns
    )


@st.composite
def one_group_scenarios(draw: st.DrawFn, shared_tree: bool = False) -> Scenario:
    """`scenarios()` / `gpu_scenarios()` cut to their first group of PodSets (what one engine
    call places); ``shared_tree``: with every node schedulable, so both views share one tree.
    Drawn so rather than filtered: every example is one a group-level property can test."""
    case = draw(st.one_of(scenarios(), gpu_scenarios()))
    nodes = all_schedulable(case.nodes) if shared_tree else case.nodes
    return Scenario(case.levels, nodes, first_group(case.pod_sets))


def _ungrouped(p: PodSetRequest) -> PodSetRequest:
    return dataclasses.replace(p, topology=dataclasses.replace(p.topology, group=None))


@st.composite
def single_pod_set_scenarios(draw: st.DrawFn) -> Scenario:
    """One PodSet, no podset group, on random or GPU-block clusters with unique hostnames."""
    if draw(st.booleans()):
        lvls = draw(levels())
        ns = draw(nodes(lvls))
        ps = draw(pod_set("main", lvls, None))
        return Scenario(lvls, with_unique_hosts(ns), (ps,))
    case = draw(gpu_scenarios())
    ps = draw(st.sampled_from([p for p in case.pod_sets if p.name != "leader"]))
    return Scenario(case.levels, case.nodes, (_ungrouped(ps),))


@st.composite
def unique_host_scenarios(draw: st.DrawFn) -> Scenario:
    """`scenarios()` / `gpu_scenarios()` (groups, several PodSets) with unique hostnames."""
    case = draw(st.one_of(scenarios(), gpu_scenarios()))
    return Scenario(case.levels, with_unique_hosts(case.nodes), case.pod_sets)


@dataclass(frozen=True)
class Growth:
    """One way of giving a cluster more capacity; `apply` returns the grown node list."""

    kind: str
    index: int = 0
    node: Node | None = None
    resource: str = ""
    amount: int = 0

    def apply(self, ns: tuple[Node, ...]) -> tuple[Node, ...]:
        if self.kind == "add-node":
            assert self.node is not None
            return (*ns, self.node)
        old = ns[self.index]
        if self.kind == "more-allocatable":
            new = dataclasses.replace(
                old,
                allocatable={
                    **old.allocatable,
                    self.resource: old.allocatable.get(self.resource, 0) + self.amount,
                },
            )
        elif self.kind == "less-usage":
            usage = dict(old.usage)
            usage[self.resource] = max(0, usage.get(self.resource, 0) - self.amount)
            new = dataclasses.replace(old, usage=usage)
        elif self.kind == "drop-usage":
            new = dataclasses.replace(old, usage={})
        else:  # pragma: no cover - the strategy draws only the kinds above
            raise ValueError(self.kind)
        return (*ns[: self.index], new, *ns[self.index + 1 :])


@st.composite
def growths(draw: st.DrawFn, lvls: tuple[str, ...], ns: tuple[Node, ...]) -> Growth:
    """A node in an existing or a new domain, more allocatable on one node, or less usage."""
    kinds = ["add-node"] + (["more-allocatable", "less-usage", "drop-usage"] if ns else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "add-node":
        labels: dict[str, str] = {}
        for lvl in lvls:
            if lvl == HOSTNAME_LABEL:
                continue
            seen = sorted({n.labels[lvl] for n in ns})
            labels[lvl] = draw(st.sampled_from([*seen, f"{lvl[0]}-new"]))
        labels[HOSTNAME_LABEL] = f"added-{len(ns)}"
        if draw(st.booleans()):
            labels["pool"] = draw(st.sampled_from(["a", "b"]))
        alloc = {
            "cpu": draw(st.sampled_from([0, 1000, 4000, 16000, 64000])),
            "nvidia.com/gpu": draw(st.sampled_from([0, 1, 8])),
            "pods": draw(st.sampled_from([0, 2, 110])),
        }
        if draw(st.booleans()):
            alloc["memory"] = draw(st.sampled_from([2**30, 2**34]))
        taints = (draw(st.sampled_from(TAINTS)),) if draw(st.integers(0, 4)) == 0 else ()
        node = Node(f"added-{len(ns)}", labels, alloc, taints=taints)
        return Growth(kind, node=node)
    index = draw(st.integers(0, len(ns) - 1))
    resource = draw(st.sampled_from([*RESOURCES, "pods"]))
    amount = draw(st.sampled_from([1, 2, 8, 1000, 2**30]))
    return Growth(kind, index=index, resource=resource, amount=amount)
