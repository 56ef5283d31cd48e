"""The native mode's Python edge: nodes and one pod group in, the kube-scheduler's choice out.

Builds the flat arrays ``scorer._native`` (or its twin ``scorer._reference_native``) reads from
the scorer's ``Node`` objects, once for **now** (free capacity; cordoned nodes and untolerated
NoSchedule/NoExecute taints filtered as ``NodeUnschedulable`` and ``TaintToleration`` do) and
once for **never** (every labelled node, empty, condition taints dropped). The kube-scheduler
does not read a node's Ready condition (the node lifecycle controller's taint stands for it),
so neither does this mode.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType

from scorer import _reference_native
from scorer.model import PODS, SCHEDULING_EFFECTS, Node, SelectorTerm, Taint, Toleration
from scorer.nodes import affinity_matches, first_untolerated, selector_matches

try:
    from scorer import _native as _compiled  # type: ignore[attr-defined]
except ImportError:  # not built: the twin gives the same answers
    _compiled = None

NATIVE_IMPLEMENTATION = "compiled" if _compiled is not None else "reference"
SCORED = ("cpu", "memory")  # NodeResourcesFit's default scoring resources, weight 1 each
# schedutil.DefaultMilliCPURequest / DefaultMemoryRequest: what scoring counts for a pod without.
NON_ZERO = {"cpu": 100, "memory": 200 * 1024 * 1024}
NO_KEY = ""  # the one placement of a group without a topology constraint: every node
# A resource no node has, one unit per node: a group whose pods take a host port (NodePorts'
# filter: two pods on one node cannot bind the same port) places at most one pod per node.
HOST_PORT = "tasgate.io/host-port"


def native_engines() -> dict[str, ModuleType]:
    """Every native engine available here, by name."""
    found: dict[str, ModuleType] = {"reference": _reference_native}
    if _compiled is not None:
        found["compiled"] = _compiled
    return found


@dataclass(frozen=True)
class NativeRequest:
    """One pod group: ``count`` pods of one shape, ``min_count`` of them at once (gang)."""

    name: str
    count: int
    min_count: int
    requests: Mapping[str, int]
    key: str | None = None  # schedulingConstraints.topology[0].key; None: no constraint
    tolerations: tuple[Toleration, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: tuple[SelectorTerm, ...] | None = None
    scheduled: int = 0  # pods of the group already bound
    bound_domain: str | None = None  # the domain they are bound in, if any
    # Pods of several shapes, in the scheduler's queue order (then ``count`` is their number and
    # ``requests`` is unused): each domain runs the per-pod cycle (``place_pods``).
    pods: tuple[Mapping[str, int], ...] = ()
    host_ports: bool = False  # its pods bind host ports (hostPort, or ports under hostNetwork)


@dataclass(frozen=True)
class DomainScore:
    value: str
    capacity: int
    placed: int
    feasible: bool
    fit_score: int
    pods_score: int

    @property
    def total(self) -> int:
        return self.fit_score + self.pods_score


@dataclass(frozen=True)
class NativePlacement:
    """The scheduler's choice: the winning domain and every domain's figures, best first."""

    fits: bool
    key: str | None
    domain: str | None
    count: int
    tied: tuple[str, ...]  # domains the scheduler picks among at random (the winner first)
    domains: tuple[DomainScore, ...]
    total_nodes: int
    labelled_nodes: int


def place_native(
    nodes: Sequence[Node],
    req: NativeRequest,
    usage: Mapping[str, Mapping[str, int]] | None,
    empty: bool,
    engine: ModuleType | None = None,
    nonzero: Mapping[str, tuple[int, int]] | None = None,
    assumed: Mapping[str, Mapping[str, int]] | None = None,
) -> NativePlacement:
    """Place one pod group as the kube-scheduler's PodGroup cycle would, on ``nodes``.

    ``assumed``: node -> requests of pods the same cycle already assumed there (the sibling groups
    a CompositePodGroup placed before this one), counted on top of ``usage``, also when ``empty``.

    ``nonzero``: node -> (milli-cpu, memory bytes) its bound pods count beyond their requests in
    the scheduler's ``NonZeroRequested`` (100m / 200Mi per container stating none), which the
    placement score reads; ignored when ``empty``."""
    engine = engine or native_engines()[NATIVE_IMPLEMENTATION]
    labelled = [n for n in nodes if req.key is None or req.key in n.labels]
    if not labelled:  # no placement at all: the cycle's "0/0 placements are available"
        return NativePlacement(False, req.key, None, 0, (), (), len(nodes), 0)
    values = sorted({n.labels[req.key] if req.key is not None else NO_KEY for n in labelled})
    index = {v: i for i, v in enumerate(values)}
    shapes = req.pods or (req.requests,)
    port = {HOST_PORT: 1} if req.host_ports else {}
    names = sorted({r for shape in shapes for r, v in shape.items() if v > 0} | {PODS, *port})
    want = {**req.requests, PODS: 1, **port}
    domain, ok, free = array("i"), array("b"), array("q")
    alloc = [[0, 0] for _ in values]
    used = [[0, 0] for _ in values]
    for node in labelled:
        d = index[node.labels[req.key] if req.key is not None else NO_KEY]
        taken = taken_on(node, usage, empty, assumed)
        domain.append(d)
        ok.append(int(schedulable_for(node, req, empty)))
        free.extend({**node.allocatable, **port}.get(r, 0) - taken.get(r, 0) for r in names)
        extra = (0, 0) if empty or nonzero is None else nonzero.get(node.name, (0, 0))
        for i, r in enumerate(SCORED):
            alloc[d][i] += node.allocatable.get(r, 0)
            used[d][i] += taken.get(r, 0) + extra[i]
    required = index.get(req.bound_domain, -2) if req.bound_domain is not None else -1
    if req.pods:
        raw = _place_pods(
            engine, req, labelled, (usage, assumed), empty, names, (domain, ok, free), alloc, used, required
        )
        if required == -2:
            raw = _none_feasible(raw)
        return _result(req, values, raw, len(nodes), len(labelled))
    raw = engine.place(
        domain,
        ok,
        _matrix(free, len(labelled), len(names)),
        array("q", [want.get(r, 0) for r in names]),
        _matrix(array("q", [x for row in alloc for x in row]), len(values), 2),
        _matrix(array("q", [x for row in used for x in row]), len(values), 2),
        array("q", [want.get(r, 0) or NON_ZERO[r] for r in SCORED]),
        req.count,
        max(req.min_count, 1),
        req.scheduled,
        max(required, -1) if required != -2 else -1,
    )
    if required == -2:  # bound pods sit in a domain no labelled node carries now
        raw = _none_feasible(raw)
    return _result(req, values, raw, len(nodes), len(labelled))


def _place_pods(
    engine: ModuleType,
    req: NativeRequest,
    labelled: Sequence[Node],
    taken_by: tuple[Mapping[str, Mapping[str, int]] | None, Mapping[str, Mapping[str, int]] | None],
    empty: bool,
    names: Sequence[str],
    nodes: tuple[array[int], array[int], array[int]],
    alloc: list[list[int]],
    used: list[list[int]],
    required: int,
) -> _reference_native.NativeRaw:
    """The heterogeneous path: per-node cpu/memory for the per-pod scores, one row per pod."""
    domain, ok, free = nodes
    usage, assumed = taken_by
    cap, taken_rows = array("q"), array("q")
    for node in labelled:
        taken = taken_on(node, usage, empty, assumed)
        cap.extend(node.allocatable.get(r, 0) for r in SCORED)
        taken_rows.extend(taken.get(r, 0) for r in SCORED)
    port = {HOST_PORT: 1} if req.host_ports else {}
    rows, nz, act = array("q"), array("q"), array("q")
    for shape in req.pods:
        rows.extend({**shape, PODS: 1, **port}.get(r, 0) for r in names)
        nz.extend(shape.get(r, 0) or NON_ZERO[r] for r in SCORED)
        act.extend(shape.get(r, 0) for r in SCORED)
    n, p = len(labelled), len(req.pods)
    raw: _reference_native.NativeRaw = engine.place_pods(
        domain,
        ok,
        _matrix(free, n, len(names)),
        _matrix(rows, p, len(names)),
        _matrix(cap, n, 2),
        _matrix(taken_rows, n, 2),
        _matrix(nz, p, 2),
        _matrix(act, p, 2),
        _matrix(array("q", [x for row in alloc for x in row]), len(alloc), 2),
        _matrix(array("q", [x for row in used for x in row]), len(used), 2),
        max(req.min_count, 1),
        req.scheduled,
        max(required, -1),
    )
    return raw


def bound_domain(labels: Mapping[str, Mapping[str, str]], key: str, bound: Sequence[str]) -> str | None:
    """``getScheduledPodsTopologyDomain``: the one domain the group's bound pods sit in; None
    when none is bound; "" (no domain: the scheduler errors) when a pod's node is unknown,
    lacks the key, or the pods sit in two domains."""
    if not bound:
        return None
    values = {labels.get(node, {}).get(key) for node in bound}
    return str(values.pop()) if len(values) == 1 and None not in values else ""


CORDON = Taint("node.kubernetes.io/unschedulable", "NoSchedule")  # what NodeUnschedulable checks


def taken_on(
    node: Node,
    usage: Mapping[str, Mapping[str, int]] | None,
    empty: bool,
    assumed: Mapping[str, Mapping[str, int]] | None,
) -> Mapping[str, int]:
    """What the node's bound pods (none when ``empty``) and the cycle's assumed pods request."""
    taken = {} if empty else (usage.get(node.name, {}) if usage is not None else node.usage)
    extra = assumed.get(node.name) if assumed is not None else None
    if not extra:
        return taken
    return {r: taken.get(r, 0) + extra.get(r, 0) for r in {*taken, *extra}}


def schedulable_for(node: Node, req: NativeRequest, empty: bool) -> bool:
    """Every filter but NodeResourcesFit: cordon, taints, nodeSelector, required affinity.

    As the kube-scheduler's NodeUnschedulable and TaintToleration filters: a cordoned node takes
    a pod that tolerates ``node.kubernetes.io/unschedulable:NoSchedule``, and only NoSchedule and
    NoExecute taints keep a pod off (PreferNoSchedule only scores)."""
    if node.unschedulable and not empty and first_untolerated([CORDON], req.tolerations) is not None:
        return False
    taints = [t for t in node.taints if t.effect in SCHEDULING_EFFECTS and not (empty and t.is_condition)]
    if first_untolerated(taints, req.tolerations) is not None:
        return False
    if not selector_matches(node, req.node_selector):
        return False
    return req.affinity is None or affinity_matches(node, req.affinity)


def _matrix(flat: array[int], rows: int, cols: int) -> memoryview:
    """A C-contiguous 2-D view (rows, cols > 0), as the compiled engine's memoryviews want."""
    return memoryview(flat).cast("B").cast("q", (rows, cols))


def _none_feasible(raw: _reference_native.NativeRaw) -> _reference_native.NativeRaw:
    n = len(raw.capacity)
    return _reference_native.NativeRaw(raw.capacity, raw.placed, [0] * n, [0] * n, [False] * n, -1, 0)


def _result(
    req: NativeRequest, values: list[str], raw: _reference_native.NativeRaw, total: int, labelled: int
) -> NativePlacement:
    scores = [
        DomainScore(v, raw.capacity[i], raw.placed[i], raw.feasible[i], raw.fit_score[i], raw.pods_score[i])
        for i, v in enumerate(values)
    ]
    best = scores[raw.best] if raw.best >= 0 else None
    tied = tuple(s.value for s in scores if best is not None and s.feasible and s.total == best.total)
    ordered = sorted(scores, key=lambda s: (not s.feasible, -s.total, -s.capacity, s.value))
    return NativePlacement(
        fits=best is not None,
        key=req.key,
        domain=best.value if best is not None else None,
        count=best.placed if best is not None else 0,
        tied=tied,
        domains=tuple(ordered),
        total_nodes=total,
        labelled_nodes=labelled,
    )
