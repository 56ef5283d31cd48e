"""Hypothesis strategies: small random topologies, nodes, usage and workloads.

Small alphabets on purpose: collisions (shared racks, equal capacities, ties in every sort
key) are where two implementations of the same algorithm drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from scorer.model import (
    HOSTNAME_LABEL,
    Mode,
    Node,
    PodSetRequest,
    SelectorRequirement,
    SelectorTerm,
    SliceLayer,
    Taint,
    Toleration,
    TopologyRequest,
)

LEVEL_NAMES = ("zone", "block", "rack")
TAINTS = (
    Taint("gpu", "NoSchedule", "true"),
    Taint("maintenance", "NoExecute"),
    Taint("soft", "PreferNoSchedule"),
    Taint("node.kubernetes.io/unreachable", "NoExecute"),
)
TOLERATIONS = (
    Toleration("gpu", "Equal", "true", "NoSchedule"),
    Toleration("maintenance", "Exists"),
    Toleration(operator="Exists"),
)
RESOURCES = ("cpu", "nvidia.com/gpu", "memory")


@dataclass(frozen=True)
class Scenario:
    levels: tuple[str, ...]
    nodes: tuple[Node, ...]
    pod_sets: tuple[PodSetRequest, ...]


@st.composite
def levels(draw: st.DrawFn) -> tuple[str, ...]:
    n = draw(st.integers(1, 3))
    chosen = LEVEL_NAMES[3 - n :]
    if draw(st.booleans()):
        return (*chosen, HOSTNAME_LABEL)
    return chosen


@st.composite
def nodes(draw: st.DrawFn, lvls: tuple[str, ...]) -> tuple[Node, ...]:
    count = draw(st.integers(1, 20))
    out = []
    for i in range(count):
        labels = {lvl: f"{lvl[0]}{draw(st.integers(0, 2))}" for lvl in lvls if lvl != HOSTNAME_LABEL}
        host = f"n{draw(st.integers(0, 20)) if draw(st.booleans()) else i}"
        labels[HOSTNAME_LABEL] = host
        if draw(st.booleans()):
            labels["pool"] = draw(st.sampled_from(["a", "b"]))
        alloc = {
            "cpu": draw(st.sampled_from([0, 1000, 4000, 8000, 16000])),
            "nvidia.com/gpu": draw(st.sampled_from([0, 1, 4, 8, 8])),
            "pods": draw(st.sampled_from([0, 1, 2, 2, 3, 4, 110])),
        }
        if draw(st.booleans()):
            alloc["memory"] = draw(st.sampled_from([2**30, 2**34]))
        usage = {r: draw(st.integers(0, max(v, 0))) for r, v in alloc.items() if draw(st.integers(0, 3)) == 0}
        out.append(
            Node(
                name=f"node-{i}",
                labels=labels,
                allocatable=alloc,
                taints=tuple(draw(st.lists(st.sampled_from(TAINTS), max_size=2, unique=True)))
                if draw(st.integers(0, 3)) == 0
                else (),
                ready=draw(st.integers(0, 5)) > 0,
                unschedulable=draw(st.integers(0, 5)) == 0,
                usage=usage,
            )
        )
    return tuple(out)


@st.composite
def topology_request(draw: st.DrawFn, lvls: tuple[str, ...], group: str | None) -> TopologyRequest:
    mode = draw(st.sampled_from(list(Mode)))
    level = (
        draw(st.sampled_from([*lvls, *lvls, *lvls, "missing-level"]))
        if mode in (Mode.REQUIRED, Mode.PREFERRED)
        else None
    )
    slice_level = slice_size = None
    layers: tuple[SliceLayer, ...] = ()
    kind = draw(st.sampled_from(["none", "none", "single", "layers"]))
    if kind == "single":
        slice_level = draw(st.sampled_from(lvls))
        slice_size = draw(st.sampled_from([1, 2, 3, 4]))
    elif kind == "layers":
        picks = sorted(draw(st.lists(st.integers(0, len(lvls) - 1), min_size=1, max_size=3, unique=True)))
        sizes = sorted(
            draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=len(picks), max_size=len(picks))),
            reverse=True,
        )
        layers = tuple(SliceLayer(lvls[p], s) for p, s in zip(picks, sizes, strict=True))
    return TopologyRequest(mode, level, slice_level, slice_size, layers, group)


@st.composite
def pod_set(
    draw: st.DrawFn, name: str, lvls: tuple[str, ...], group: str | None, count: int | None = None
) -> PodSetRequest:
    requests = {
        r: draw(st.sampled_from([0, 1, 1, 2, 500, 1000, 4000])) for r in RESOURCES if draw(st.booleans())
    }
    if "memory" in requests:
        requests["memory"] *= 2**20
    affinity = None
    if draw(st.integers(0, 5)) == 0:
        affinity = (
            SelectorTerm(
                (SelectorRequirement("pool", draw(st.sampled_from(["In", "NotIn", "Exists"])), ("a",)),)
            ),
        )
    return PodSetRequest(
        name=name,
        count=count if count is not None else draw(st.integers(0, 12)),
        requests=requests,
        topology=draw(topology_request(lvls, group)),
        tolerations=tuple(draw(st.lists(st.sampled_from(TOLERATIONS), max_size=2, unique=True))),
        node_selector={"pool": "a"} if draw(st.integers(0, 5)) == 0 else {},
        affinity=affinity,
    )


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    lvls = draw(levels())
    ns = draw(nodes(lvls))
    sets: list[PodSetRequest] = []
    if draw(st.booleans()):
        sets.append(draw(pod_set("leader", lvls, "g", count=1)))
        workers = draw(pod_set("workers", lvls, "g"))
        leader_topology = TopologyRequest(workers.topology.mode, workers.topology.level, group="g")
        sets[0] = PodSetRequest(sets[0].name, 1, sets[0].requests, leader_topology, sets[0].tolerations)
        sets.append(workers)
    for i in range(draw(st.integers(1 if not sets else 0, 2))):
        sets.append(draw(pod_set(f"ps{i}", lvls, None)))
    return Scenario(lvls, ns, tuple(sets))


@st.composite
def gpu_scenarios(draw: st.DrawFn) -> Scenario:
    """Uniform 8-GPU hosts in blocks and racks, partly used: gangs that must spread."""
    lvls = ("block", "rack", HOSTNAME_LABEL) if draw(st.booleans()) else ("block", "rack")
    out = []
    for i in range(draw(st.integers(1, 24))):
        labels = {
            "block": f"b{draw(st.integers(0, 2))}",
            "rack": f"r{draw(st.integers(0, 3))}",
            HOSTNAME_LABEL: f"h{i}",
        }
        used = draw(st.sampled_from([0, 0, 2, 4, 8]))
        out.append(
            Node(
                f"h{i}",
                labels,
                {"cpu": 64000, "nvidia.com/gpu": 8, "pods": 110},
                usage={"nvidia.com/gpu": used},
            )
        )
    sets: list[PodSetRequest] = []
    grouped = draw(st.booleans())
    if grouped:
        sets.append(
            PodSetRequest("leader", 1, {"cpu": 1000}, TopologyRequest(Mode.REQUIRED, "rack", group="g"))
        )
    for i in range(draw(st.integers(1, 2))):
        mode = draw(st.sampled_from([Mode.REQUIRED, Mode.PREFERRED, Mode.UNCONSTRAINED, Mode.IMPLIED]))
        level = draw(st.sampled_from(lvls)) if mode in (Mode.REQUIRED, Mode.PREFERRED) else None
        size = draw(st.sampled_from([1, 1, 2, 4]))
        slice_level = (
            draw(st.sampled_from(lvls[lvls.index(level) :] if level else lvls)) if size > 1 else None
        )
        group = "g" if grouped and i == 0 else None
        if group:
            mode, level = Mode.REQUIRED, "rack"
            slice_level = "rack" if size > 1 else None
        req = TopologyRequest(mode, level, slice_level, size if size > 1 else None, group=group)
        sets.append(
            PodSetRequest(
                f"w{i}",
                size * draw(st.integers(1, 10)),
                {"nvidia.com/gpu": draw(st.sampled_from([1, 2, 4, 8]))},
                req,
            )
        )
    return Scenario(lvls, tuple(out), tuple(sets))
