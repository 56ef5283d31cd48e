"""tasgate's own placement scenarios, answers worked out by hand from Kueue's algorithm.

Kueue's own cases live in ``kueue_cases/``; these are ours, mostly on one GPU cluster:
2 blocks × 2 racks × 4 hosts of 8 GPUs, hosts named ``b<block>r<rack>n<host>``. Each case
says, in ``why``, how the answer follows from Kueue's rules (DESIGN.md §2 and the docstrings of
``scorer._reference``): leaf counts are ``min(free // request)`` with one ``pods`` unit per pod;
BestFit orders domains by slices desc, pods asc, path, then takes the *smallest* domain that
still holds everything; below the chosen domain, children are filled greedily in that order
with best fit for the last chunk; LeastFreeCapacity orders ascending; preferred climbs and
spreads at the top. Every case runs on both engines.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pytest

import scorer
from scorer import Cluster
from scorer.model import (
    HOSTNAME_LABEL,
    LevelCapacity,
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

H = HOSTNAME_LABEL
GPU = "nvidia.com/gpu"
GPU_LEVELS = ("block", "rack", H)
RACK_LEAVES = ("block", "rack")
ALLOCATABLE = {"cpu": 64000, "memory": 512 * 2**30, GPU: 8, "pods": 110}
HOSTS = tuple(f"b{b}r{r}n{n}" for b in (1, 2) for r in (1, 2) for n in (1, 2, 3, 4))
NO_GPU_TAINT = Taint("gpu", "NoSchedule", "true")
DISK_PRESSURE = Taint("node.kubernetes.io/disk-pressure", "NoSchedule")


def gpu_cluster(
    *,
    used: Mapping[str, int] | None = None,
    taints: Mapping[str, tuple[Taint, ...]] | None = None,
    labels: Mapping[str, Mapping[str, str]] | None = None,
    cordoned: tuple[str, ...] = (),
    not_ready: tuple[str, ...] = (),
    no_pod_slots: tuple[str, ...] = (),
) -> tuple[Node, ...]:
    """The 16-host cluster; ``used`` is GPUs already taken per host."""
    used, taints, labels = used or {}, taints or {}, labels or {}
    return tuple(
        Node(
            name=h,
            labels={"block": f"b{h[1]}", "rack": f"r{h[3]}", H: h, **labels.get(h, {})},
            allocatable=ALLOCATABLE,
            taints=taints.get(h, ()),
            ready=h not in not_ready,
            unschedulable=h in cordoned,
            usage={**({GPU: used[h]} if h in used else {}), **({"pods": 110} if h in no_pod_slots else {})},
        )
        for h in HOSTS
    )


def gang(
    name: str,
    count: int,
    gpus: int = 8,
    mode: Mode = Mode.REQUIRED,
    level: str | None = "rack",
    *,
    slice_level: str | None = None,
    slice_size: int | None = None,
    slice_layers: tuple[SliceLayer, ...] = (),
    group: str | None = None,
    tolerations: tuple[Toleration, ...] = (),
    node_selector: Mapping[str, str] | None = None,
    affinity: tuple[SelectorTerm, ...] | None = None,
) -> PodSetRequest:
    """``count`` pods of ``gpus`` GPUs each (``gpus=0``: one cpu instead)."""
    topology = TopologyRequest(
        mode,
        level if mode in (Mode.REQUIRED, Mode.PREFERRED) else None,
        slice_level,
        slice_size,
        slice_layers,
        group,
    )
    requests = {GPU: gpus} if gpus else {"cpu": 1000}
    return PodSetRequest(name, count, requests, topology, tolerations, node_selector or {}, affinity)


@dataclass(frozen=True)
class Fit:
    domains: tuple[tuple[tuple[str, ...], int], ...]
    levels: tuple[str, ...] = (H,)


@dataclass(frozen=True)
class NoFit:
    reason: str


def on_hosts(*hosts: str, each: int = 1) -> Fit:
    return Fit(tuple(((h,), each) for h in hosts))


def hosts_of(prefix: str) -> tuple[str, ...]:
    return tuple(h for h in HOSTS if h.startswith(prefix))


@dataclass(frozen=True)
class Case:
    name: str
    why: str
    nodes: tuple[Node, ...]
    pod_sets: tuple[PodSetRequest, ...]
    want: Mapping[str, Fit | NoFit]
    view: str = "now"
    levels: tuple[str, ...] = GPU_LEVELS
    flavor_tolerations: tuple[Toleration, ...] = ()
    # the per-level table of the first PodSet, when the case pins it
    level_table: tuple[LevelCapacity, ...] | None = None


def table(*rows: tuple[str, int, int, int, int, tuple[str, ...]]) -> tuple[LevelCapacity, ...]:
    """Rows of (level, max_pods, max_slices, fitting_domains, domains, best_domain)."""
    return tuple(LevelCapacity(*row) for row in rows)


CASES = (
    Case(
        name="required rack: the first rack when all are equal",
        why="Every rack holds 4 one-host pods; the tie on (slices, pods) goes to the smallest path "
        "b1/r1, and its 4 hosts take one pod each. Blocks hold 8, so both 'fit' a 4-pod gang; "
        "racks hold 4 (all fit); a host holds 1 (none fits 4).",
        nodes=gpu_cluster(),
        pod_sets=(gang("main", 4),),
        want={"main": on_hosts(*hosts_of("b1r1"))},
        level_table=table(
            ("block", 8, 8, 2, 2, ("b1",)),
            ("rack", 4, 4, 4, 4, ("b1", "r1")),
            (H, 1, 1, 0, 16, ("b1", "r1", "b1r1n1")),
        ),
    ),
    Case(
        name="required rack: best fit takes the fullest rack that still holds the gang",
        why="b1r1 has 2 free hosts, b2r1 3, the others 4. Order: b1r2, b2r2 (4), b2r1 (3), b1r1 (2); "
        "the smallest rack holding 2 is b1r1. Inside it the free hosts n3, n4 sort first.",
        nodes=gpu_cluster(used={"b1r1n1": 8, "b1r1n2": 8, "b2r1n1": 8}),
        pod_sets=(gang("main", 2),),
        want={"main": on_hosts("b1r1n3", "b1r1n4")},
    ),
    Case(
        name="required rack: too big for any rack, no host excluded",
        why="A rack holds 4 of the 8 one-host pods; every host fits one pod, so Kueue lists no "
        "exclusions and the message has no 'Total nodes' part.",
        nodes=gpu_cluster(),
        pod_sets=(gang("main", 8),),
        want={"main": NoFit('topology "default" allows to fit only 4 out of 8 pod(s)')},
    ),
    Case(
        name="required rack: full hosts are counted as resource exclusions",
        why="b2r2n1 and b2r2n2 have no GPU left: they fit 0 pods and gpu is the limiting resource "
        "(gpu 0 < pods 110). Best rack still holds 4. Blocks: b1 8, b2 6.",
        nodes=gpu_cluster(used={"b2r2n1": 8, "b2r2n2": 8}),
        pod_sets=(gang("main", 8),),
        want={
            "main": NoFit(
                'topology "default" allows to fit only 4 out of 8 pod(s). '
                'Total nodes: 16; excluded: resource "nvidia.com/gpu": 2'
            )
        },
        level_table=table(
            ("block", 8, 8, 1, 2, ("b1",)),
            ("rack", 4, 4, 0, 4, ("b1", "r1")),
            (H, 1, 1, 0, 16, ("b1", "r1", "b1r1n1")),
        ),
    ),
    Case(
        name="every pod takes a pods slot",
        why="b2r2n1 runs 110 pods already: its 8 GPUs are free but it has no pod slot, so it fits "
        "0 pods and 'pods' is the limiting resource (gpu 1 > pods 0).",
        nodes=gpu_cluster(no_pod_slots=("b2r2n1",)),
        pod_sets=(gang("main", 8),),
        want={
            "main": NoFit(
                'topology "default" allows to fit only 4 out of 8 pod(s). '
                'Total nodes: 16; excluded: resource "pods": 1'
            )
        },
    ),
    Case(
        name="a 16-GPU pod never fits an 8-GPU host",
        why="Every host fits 0 pods of 16 GPUs: all 16 are resource exclusions, and 0 fit.",
        nodes=gpu_cluster(),
        pod_sets=(gang("main", 1, gpus=16),),
        want={
            "main": NoFit(
                'topology "default" doesn\'t allow to fit any of 1 pod(s). '
                'Total nodes: 16; excluded: resource "nvidia.com/gpu": 16'
            )
        },
    ),
    Case(
        name="limiting resource ties go to the first resource name",
        why="cpu 100 cores and 16 GPUs both fit 0 pods on every host; Kueue keeps the first of the "
        "sorted names (cpu < nvidia.com/gpu < pods) as the limiting one.",
        nodes=gpu_cluster(),
        pod_sets=(
            PodSetRequest("main", 1, {"cpu": 100000, GPU: 16}, TopologyRequest(Mode.REQUIRED, "rack")),
        ),
        want={
            "main": NoFit(
                'topology "default" doesn\'t allow to fit any of 1 pod(s). '
                'Total nodes: 16; excluded: resource "cpu": 16'
            )
        },
    ),
    Case(
        name="preferred rack climbs to the tightest block",
        why="No rack holds 6, so preferred climbs to blocks: b1 holds 8, b2 6 (b2r2n3/n4 are full). "
        "Best fit takes b2. Racks of b2: b2r1 (4) first, then b2r2 takes the last 2. Hosts: all "
        "children of both racks are sorted together and filled greedily: the six free hosts.",
        nodes=gpu_cluster(used={"b2r2n3": 8, "b2r2n4": 8}),
        pod_sets=(gang("main", 6, mode=Mode.PREFERRED),),
        want={"main": on_hosts(*hosts_of("b2r1"), "b2r2n1", "b2r2n2")},
        level_table=table(
            ("block", 8, 8, 2, 2, ("b1",)),
            ("rack", 4, 4, 0, 4, ("b1", "r1")),
            (H, 1, 1, 0, 16, ("b1", "r1", "b1r1n1")),
        ),
    ),
    Case(
        name="preferred rack spreads over blocks at the top level",
        why="b1 has 3 full hosts (b1 holds 5, b2 8): no rack or block holds 10. At the top: b2 (8) "
        "first, then best fit among the rest for the last 2: b1. Racks of both, sorted together: "
        "b2r1 4, b2r2 4, then the last 2 go to the tightest rack that holds 2, b1r1 (2 free) rather "
        "than b1r2 (3). Hosts of those three racks, sorted together by path: b1r1n3, b1r1n4 first.",
        nodes=gpu_cluster(used={"b1r1n1": 8, "b1r1n2": 8, "b1r2n1": 8}),
        pod_sets=(gang("main", 10, mode=Mode.PREFERRED),),
        want={"main": on_hosts("b1r1n3", "b1r1n4", *hosts_of("b2"))},
    ),
    Case(
        name="preferred: even spreading over everything is not enough",
        why="At the top level the spread gathers every block: 16 of 20 pods. Kueue reports the "
        "spread total, not the best single domain.",
        nodes=gpu_cluster(),
        pod_sets=(gang("main", 20, mode=Mode.PREFERRED),),
        want={"main": NoFit('topology "default" allows to fit only 16 out of 20 pod(s)')},
    ),
    Case(
        name="unconstrained: least free capacity first",
        why="1-GPU pods: b1r1n1 fits 0, b2r2n4 2, b1r2n1 4, the rest 8. No host holds 12, so "
        "LeastFreeCapacity spreads from the fullest: 0 (nothing), 2, 4, then the first empty host "
        "takes the remaining 6. Domains are listed by path.",
        nodes=gpu_cluster(used={"b1r1n1": 8, "b1r2n1": 4, "b2r2n4": 6}),
        pod_sets=(gang("main", 12, gpus=1, mode=Mode.UNCONSTRAINED),),
        want={"main": Fit(((("b1r1n2",), 6), (("b1r2n1",), 4), (("b2r2n4",), 2)))},
    ),
    Case(
        name="implied: the fullest single host that holds every pod",
        why="LeastFreeCapacity first looks for one host in ascending order: b1r1n1 fits 2 (< 3), "
        "b1r1n2 fits 3: all three pods go there, not to the emptier b1r1n3 or a free host.",
        nodes=gpu_cluster(used={"b1r1n1": 6, "b1r1n2": 5, "b1r1n3": 4}),
        pod_sets=(gang("main", 3, gpus=1, mode=Mode.IMPLIED),),
        want={"main": Fit(((("b1r1n2",), 3),))},
    ),
    Case(
        name="implied on the empty cluster ignores usage",
        why="The never view drops usage: every host fits 8, the first by path takes all three.",
        nodes=gpu_cluster(used={"b1r1n1": 6, "b1r1n2": 5, "b1r1n3": 4}),
        pod_sets=(gang("main", 3, gpus=1, mode=Mode.IMPLIED),),
        want={"main": Fit(((("b1r1n1",), 3),))},
        view="never",
    ),
    Case(
        name="slices: two rack slices in one block",
        why="Slices of 4 at rack level: b1r2n1 is full, so b1r2 holds 3 pods = 0 slices and b1 "
        "holds 1 slice; b2 holds 2. Best fit: b2; its racks take one slice each, 4 hosts each. "
        "Per level: rack slices are pods // 4; hosts, below the slice level, hold 1 // 4 = 0.",
        nodes=gpu_cluster(used={"b1r2n1": 8}),
        pod_sets=(gang("main", 8, level="block", slice_level="rack", slice_size=4),),
        want={"main": on_hosts(*hosts_of("b2"))},
        level_table=table(
            ("block", 8, 2, 1, 2, ("b2",)),
            ("rack", 4, 1, 0, 4, ("b1", "r1")),
            (H, 1, 0, 0, 16, ("b1", "r1", "b1r1n1")),
        ),
    ),
    Case(
        name="slices: the message counts slices",
        why="b1r2n1 and b2r1n1 are full: each block keeps one whole rack, 1 slice of the 2 needed.",
        nodes=gpu_cluster(used={"b1r2n1": 8, "b2r1n1": 8}),
        pod_sets=(gang("main", 8, level="block", slice_level="rack", slice_size=4),),
        want={
            "main": NoFit(
                'topology "default" allows to fit only 1 out of 2 slice(s). '
                'Total nodes: 16; excluded: resource "nvidia.com/gpu": 2'
            )
        },
    ),
    Case(
        name="multi-layer slices fit in the tightest block",
        why="4-GPU pods, 2 per host; layers rack×4 and host×2. b1r1n1 has 4 GPUs used: 1 pod, which "
        "rounds to 0 host slices, so b1r1 counts 6 pods = 1 rack slice, b1 3 slices, b2 4. Best "
        "fit for 2 rack slices: b1; its racks: b1r2 (2 slices) holds both; 2 pods per host.",
        nodes=gpu_cluster(used={"b1r1n1": 4}),
        pod_sets=(
            gang(
                "main",
                8,
                gpus=4,
                level="block",
                slice_layers=(SliceLayer("rack", 4), SliceLayer(H, 2)),
            ),
        ),
        want={"main": on_hosts(*hosts_of("b1r2"), each=2)},
    ),
    Case(
        name="multi-layer slices: the per-layer message",
        why="16 pods = 4 rack slices = 8 host slices. b1: b1r1n1 fits 1 pod (4 GPUs used) = 0 host "
        "slices, so b1r1 = 6 pods = 1 rack slice, b1r2 = 2: b1 has 3. b2r1n1 is full (excluded) "
        "and b2r2n1 fits 1: b2 has 2. The best block is b1: 3/4 rack slices; its hosts hold 7 "
        "host slices (0 + 7 × 1).",
        nodes=gpu_cluster(used={"b1r1n1": 4, "b2r1n1": 8, "b2r2n1": 4}),
        pod_sets=(
            gang(
                "main",
                16,
                gpus=4,
                level="block",
                slice_layers=(SliceLayer("rack", 4), SliceLayer(H, 2)),
            ),
        ),
        want={
            "main": NoFit(
                'topology "default" doesn\'t allow to fit; 3/4 slice(s) fit on level rack; '
                "7/8 slice(s) fit on level kubernetes.io/hostname. "
                'Total nodes: 16; excluded: resource "nvidia.com/gpu": 1'
            )
        },
    ),
    Case(
        name="untolerated taints exclude hosts; PreferNoSchedule does not",
        why="b1r1n1/n2 carry gpu=true:NoSchedule: excluded, b1r1 holds 2. b2r2n1's "
        "PreferNoSchedule taint is not a scheduling taint. Best rack: 4 of 5.",
        nodes=gpu_cluster(
            taints={
                "b1r1n1": (NO_GPU_TAINT,),
                "b1r1n2": (NO_GPU_TAINT,),
                "b2r2n1": (Taint("soft", "PreferNoSchedule"),),
            }
        ),
        pod_sets=(gang("main", 5),),
        want={
            "main": NoFit(
                'topology "default" allows to fit only 4 out of 5 pod(s). '
                'Total nodes: 16; excluded: taint "gpu=true:NoSchedule": 2'
            )
        },
    ),
    Case(
        name="a pod toleration lets the gang use the tainted rack",
        why="Tolerated, b1r1 is whole again and wins the tie on path.",
        nodes=gpu_cluster(taints={"b1r1n1": (NO_GPU_TAINT,), "b1r1n2": (NO_GPU_TAINT,)}),
        pod_sets=(gang("main", 4, tolerations=(Toleration("gpu", "Equal", "true", "NoSchedule"),)),),
        want={"main": on_hosts(*hosts_of("b1r1"))},
    ),
    Case(
        name="without a toleration the gang avoids the tainted rack",
        why="b1r1 holds 2; the racks holding 4 are b1r2, b2r1, b2r2 and best fit keeps the first.",
        nodes=gpu_cluster(taints={"b1r1n1": (NO_GPU_TAINT,), "b1r1n2": (NO_GPU_TAINT,)}),
        pod_sets=(gang("main", 4),),
        want={"main": on_hosts(*hosts_of("b1r2"))},
    ),
    Case(
        name="a flavor toleration counts like the pod's own",
        why="ResourceFlavor tolerations are added to the pod's: the taint is tolerated, b1r1 wins.",
        nodes=gpu_cluster(taints={"b1r1n1": (NO_GPU_TAINT,), "b1r1n2": (NO_GPU_TAINT,)}),
        pod_sets=(gang("main", 4),),
        want={"main": on_hosts(*hosts_of("b1r1"))},
        flavor_tolerations=(Toleration("gpu", "Exists"),),
    ),
    Case(
        name="nodeSelector, taints and resources, each counted once, reasons sorted",
        why="Only b2 hosts have pool=a. Taints are checked first: b1r1n1/n2 count as taint, the "
        "other 6 b1 hosts as nodeSelector; b2r2n4 is full. Best block b2 holds 7 of 9.",
        nodes=gpu_cluster(
            taints={"b1r1n1": (NO_GPU_TAINT,), "b1r1n2": (NO_GPU_TAINT,)},
            labels={h: {"pool": "a"} for h in hosts_of("b2")},
            used={"b2r2n4": 8},
        ),
        pod_sets=(gang("main", 9, level="block", node_selector={"pool": "a"}),),
        want={
            "main": NoFit(
                'topology "default" allows to fit only 7 out of 9 pod(s). Total nodes: 16; '
                'excluded: nodeSelector: 6, resource "nvidia.com/gpu": 1, taint "gpu=true:NoSchedule": 2'
            )
        },
    ),
    Case(
        name="required node affinity picks the matching block",
        why="pool In [a] matches the 8 b2 hosts only; b1 holds nothing, b2 the whole gang.",
        nodes=gpu_cluster(labels={h: {"pool": "a"} for h in hosts_of("b2")}),
        pod_sets=(
            gang(
                "main",
                8,
                level="block",
                affinity=(SelectorTerm((SelectorRequirement("pool", "In", ("a",)),)),),
            ),
        ),
        want={"main": on_hosts(*hosts_of("b2"))},
    ),
    Case(
        name="required node affinity exclusions are named",
        why="Same cluster, 9 pods: the 8 b1 hosts are 'affinity' exclusions, b2 holds 8.",
        nodes=gpu_cluster(labels={h: {"pool": "a"} for h in hosts_of("b2")}),
        pod_sets=(
            gang(
                "main",
                9,
                level="block",
                affinity=(SelectorTerm((SelectorRequirement("pool", "In", ("a",)),)),),
            ),
        ),
        want={
            "main": NoFit(
                'topology "default" allows to fit only 8 out of 9 pod(s). '
                "Total nodes: 16; excluded: affinity: 8"
            )
        },
    ),
    Case(
        name="now: cordoned and NotReady hosts are not there",
        why="Kueue's node set drops b1r1n1 (cordoned) and b1r1n2 (NotReady): 14 nodes; b2r2n4 is "
        "full. b1 holds 6, b2 7: 7 of 8.",
        nodes=gpu_cluster(cordoned=("b1r1n1",), not_ready=("b1r1n2",), used={"b2r2n4": 8}),
        pod_sets=(gang("main", 8, level="block"),),
        want={
            "main": NoFit(
                'topology "default" allows to fit only 7 out of 8 pod(s). '
                'Total nodes: 14; excluded: resource "nvidia.com/gpu": 1'
            )
        },
    ),
    Case(
        name="never: cordoned and NotReady hosts count, usage does not",
        why="The empty cluster has all 16 hosts free: both blocks hold 8, b1 wins the tie.",
        nodes=gpu_cluster(cordoned=("b1r1n1",), not_ready=("b1r1n2",), used={"b2r2n4": 8}),
        pod_sets=(gang("main", 8, level="block"),),
        want={"main": on_hosts(*hosts_of("b1"))},
        view="never",
    ),
    Case(
        name="now: a condition taint excludes its host",
        why="disk-pressure is a condition taint; now keeps it: b1r1n1 is excluded, best rack 4 of 5.",
        nodes=gpu_cluster(taints={"b1r1n1": (DISK_PRESSURE,)}),
        pod_sets=(gang("main", 5),),
        want={
            "main": NoFit(
                'topology "default" allows to fit only 4 out of 5 pod(s). Total nodes: 16; '
                'excluded: taint "node.kubernetes.io/disk-pressure:NoSchedule": 1'
            )
        },
    ),
    Case(
        name="never: condition taints are dropped",
        why="The empty cluster drops condition taints: nothing is excluded, so no suffix.",
        nodes=gpu_cluster(taints={"b1r1n1": (DISK_PRESSURE,)}),
        pod_sets=(gang("main", 5),),
        want={"main": NoFit('topology "default" allows to fit only 4 out of 5 pod(s)')},
        view="never",
    ),
    Case(
        name="racks as leaves: nodes summed, taints not checked",
        why="Lowest level rack: a leaf is 4 hosts, 32 GPUs, and taints are not checked (b1r1n1's "
        "counts). Required block: b1; b1r1 takes 4, b1r2 the last 2. The assignment names full "
        "paths at every level.",
        nodes=gpu_cluster(taints={"b1r1n1": (NO_GPU_TAINT,)}),
        pod_sets=(gang("main", 6, level="block"),),
        want={"main": Fit(((("b1", "r1"), 4), (("b1", "r2"), 2)), levels=RACK_LEAVES)},
        levels=RACK_LEAVES,
        level_table=table(
            ("block", 8, 8, 2, 2, ("b1",)),
            ("rack", 4, 4, 0, 4, ("b1", "r1")),
        ),
    ),
    Case(
        name="racks as leaves: fragmented GPUs add up",
        why="Every b1r1 host has 4 GPUs used: no host could run an 8-GPU pod, but the leaf sums "
        "16 free GPUs = 2 pods, and best fit prefers that fullest rack.",
        nodes=gpu_cluster(used={h: 4 for h in hosts_of("b1r1")}),
        pod_sets=(gang("main", 2),),
        want={"main": Fit(((("b1", "r1"), 2),), levels=RACK_LEAVES)},
        levels=RACK_LEAVES,
    ),
    Case(
        name="racks as leaves: 'Total nodes' counts leaves",
        why="b2r2's four hosts are full: one leaf fits 0. 4 leaves in all; b1 holds 8 of 10.",
        nodes=gpu_cluster(used={h: 8 for h in hosts_of("b2r2")}),
        pod_sets=(gang("main", 10, level="block"),),
        want={
            "main": NoFit(
                'topology "default" allows to fit only 8 out of 10 pod(s). '
                'Total nodes: 4; excluded: resource "nvidia.com/gpu": 1'
            )
        },
        levels=RACK_LEAVES,
    ),
    Case(
        name="no node left now: no topology domains",
        why="Every host is cordoned: the now tree is empty at the requested level.",
        nodes=gpu_cluster(cordoned=HOSTS),
        pod_sets=(gang("main", 1),),
        want={"main": NoFit("no topology domains at level: rack")},
    ),
    Case(
        name="a level the topology does not have",
        why="Kueue checks the requested level before anything else.",
        nodes=gpu_cluster(),
        pod_sets=(gang("main", 1, level="zone"), gang("pref", 1, mode=Mode.PREFERRED, level="zone")),
        want={
            "main": NoFit("no requested topology level: zone"),
            "pref": NoFit("no requested topology level: zone"),
        },
    ),
    Case(
        name="two PodSets in order: the second sees the first's pods",
        why="b1r1 holds 2 (n1/n2 full). 'first' (2 pods) best-fits into b1r1: n3, n4. That leaves "
        "b1r1 empty-handed, so 'second' (2 pods) goes to the next tightest fit, b1r2: n1, n2. "
        "Alone, 'second' would have taken b1r1 too.",
        nodes=gpu_cluster(used={"b1r1n1": 8, "b1r1n2": 8}),
        pod_sets=(gang("first", 2), gang("second", 2)),
        want={"first": on_hosts("b1r1n3", "b1r1n4"), "second": on_hosts("b1r2n1", "b1r2n2")},
    ),
    Case(
        name="two PodSets on one host's GPUs",
        why="Per-host placement (required hostname), 1-GPU pods. b2r2n4 has 7 free: 'first' (6) "
        "best-fits there. 1 GPU is left on it, so 'second' (2) takes the next tightest host, "
        "which is the first free one, b1r1n1.",
        nodes=gpu_cluster(used={"b2r2n4": 1}),
        pod_sets=(gang("first", 6, gpus=1, level=H), gang("second", 2, gpus=1, level=H)),
        want={"first": Fit(((("b2r2n4",), 6),)), "second": Fit(((("b1r1n1",), 2),))},
    ),
    Case(
        name="leader and workers: a cpu-only leader shares a worker's host",
        why="The leader (1 cpu) fits beside a worker on every host, so with-leader counts equal the "
        "plain ones: blocks 8, racks 4. Required block: b1. The leader goes to the first "
        "leader-capable domain at each level (b1r1, then b1r1n1); workers fill all 8 hosts.",
        nodes=gpu_cluster(),
        pod_sets=(
            gang("leader", 1, gpus=0, level="block", group="g"),
            gang("workers", 8, level="block", group="g"),
        ),
        want={"leader": on_hosts("b1r1n1"), "workers": on_hosts(*hosts_of("b1"))},
        level_table=table(
            ("block", 8, 8, 2, 2, ("b1",)),
            ("rack", 4, 4, 0, 4, ("b1", "r1")),
            (H, 1, 1, 0, 16, ("b1", "r1", "b1r1n1")),
        ),
    ),
    Case(
        name="leader and workers: a GPU leader takes a host of its own",
        why="An 8-GPU leader leaves its host no room for a worker: a rack holds 3 workers with the "
        "leader, a block 7. Required block b1; the leader goes to b1r1n1, the 7 workers to the "
        "other b1 hosts. The group is listed leader first, workers are larger so are the workers.",
        nodes=gpu_cluster(),
        pod_sets=(
            gang("leader", 1, level="block", group="g"),
            gang("workers", 7, level="block", group="g"),
        ),
        want={
            "leader": on_hosts("b1r1n1"),
            "workers": on_hosts(*[h for h in hosts_of("b1") if h != "b1r1n1"]),
        },
    ),
    Case(
        name="leader and workers: Kueue reports the count without the leader",
        why="Required rack, 4 workers + an 8-GPU leader: with the leader a rack holds only 3 "
        "workers, so it does not fit; Kueue's message uses the top rack's sliceState (4, no "
        "leader), hence the odd 'only 4 out of 4'. Both PodSets carry the reason.",
        nodes=gpu_cluster(),
        pod_sets=(gang("leader", 1, group="g"), gang("workers", 4, group="g")),
        want={
            "leader": NoFit('topology "default" allows to fit only 4 out of 4 pod(s)'),
            "workers": NoFit('topology "default" allows to fit only 4 out of 4 pod(s)'),
        },
    ),
)

ENGINES = scorer.engines()


def test_enough_cases_with_unique_names() -> None:
    assert len(CASES) >= 20
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_placement(case: Case, engine: str) -> None:
    cluster = Cluster.build("default", case.levels, case.nodes, flavor_tolerations=case.flavor_tolerations)
    view = cluster.now if case.view == "now" else cluster.never
    placements = {p.name: p for p in view.place(case.pod_sets, engine=ENGINES[engine])}
    assert set(case.want) <= set(placements)
    for name, want in case.want.items():
        got = placements[name]
        if isinstance(want, Fit):
            assert got.fits, (name, got.reason)
            assert got.assignment is not None
            assert got.assignment.levels == want.levels, name
            assert tuple((d.values, d.count) for d in got.assignment.domains) == want.domains, name
            assert got.reason == ""
        else:
            assert not got.fits, (name, got.assignment)
            assert got.assignment is None
            assert got.reason == want.reason, name
            assert not got.anomaly
    if case.level_table is not None:
        assert placements[case.pod_sets[0].name].levels == case.level_table
