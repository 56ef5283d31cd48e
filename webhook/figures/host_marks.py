"""Which hosts hold no pod of the map's gang shapes, and why: the map counts as `check` counts.

A shape's pods tolerate what a workload of the flavor tolerates to run there at all — the
flavor's tolerations, the taints every node of the flavor carries (a GPU pool's own) and the
accelerator's taint, which the ExtendedResourceToleration admission plugin gives every pod asking
for it — and nothing else: a host tainted for some pods only (maintenance, a team's hosts) holds
none of them, exactly as `check` counts a workload that does not tolerate the taint. Such hosts
are marked ("tainted maintenance=true:NoSchedule"), as NotReady and cordoned ones are, so the
map's "3" is the "3" `check` says and a person sees why (`fragmentation` draws the figures).
"""

from __future__ import annotations

from collections.abc import Sequence

from scorer import View
from scorer.model import SCHEDULING_EFFECTS, Node, Taint, Toleration
from scorer.tree import Tree

Path = tuple[str, ...]
# Per host path why it holds no shape's pod; per domain path the accelerators of its tainted hosts.
Marks = tuple[dict[Path, tuple[str, ...]], dict[Path, int]]


def shape_tolerations(nodes: Sequence[Node], accelerator: str) -> tuple[Toleration, ...]:
    """What a shape's pod tolerates besides the flavor's tolerations (the view adds those): the
    taints every node of the flavor carries and the accelerator's own NoSchedule taint; not a
    taint some nodes carry, nor a node-condition taint."""
    common: set[tuple[str, str]] | None = None
    for node in nodes:
        own = {
            (t.key, t.effect) for t in node.taints if t.effect in SCHEDULING_EFFECTS and not t.is_condition
        }
        common = own if common is None else common & own
        if not common:
            break
    found = [Toleration(key, "Exists", "", effect) for key, effect in sorted(common or ())]
    return (*found, Toleration(accelerator, "Exists", "", "NoSchedule")) if accelerator else tuple(found)


def host_marks(never: View, tolerations: Sequence[Toleration], resources: Sequence[str], away: bool) -> Marks:
    """The marks of every host of the ``never`` view (every node of the flavor). Taints count only
    where Kueue checks them, on host leaves. Judged once per taint class (few in a cluster), and
    node by node only when some node is away or carries a condition taint (``away``: the classes
    of the ``never`` tree leave condition taints out)."""
    tree = never.tree
    if not tree.hostname_leaves:
        return {}, {}
    by_class = [_untolerated(taints, tolerations) for taints in tree.taint_classes]
    marked = {i for i, found in enumerate(by_class) if found}
    leaves: dict[int, tuple[str, ...]] = {}
    if marked:
        leaves = {leaf: by_class[cls] for leaf, cls in enumerate(tree.taint_class) if cls in marked}
    for leaf, node in enumerate(tree.leaf_nodes if away else ()):
        if not node.schedulable_now or any(t.is_condition for t in node.taints):
            leaves[leaf] = _node_marks(node, tolerations)
    found = {leaf: why for leaf, why in leaves.items() if why}
    return {tree.leaf_path(leaf): why for leaf, why in found.items()}, _tainted(tree, found, resources)


def _untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> tuple[str, ...]:
    kept = (t for t in taints if t.effect in SCHEDULING_EFFECTS)
    return tuple(f"tainted {t}" for t in kept if not any(o.tolerates(t) for o in tolerations))


def _node_marks(node: Node, tolerations: Sequence[Toleration]) -> tuple[str, ...]:
    away = ("not ready",) * (not node.ready) + ("cordoned",) * node.unschedulable
    return away or _untolerated(node.taints, tolerations)


def _tainted(tree: Tree, leaves: dict[int, tuple[str, ...]], resources: Sequence[str]) -> dict[Path, int]:
    """The accelerators of the tainted hosts (not the away ones: those are unavailable), added up
    into every ancestor domain."""
    cols = [c for c in (tree.resource_column(r) for r in resources) if c >= 0]
    width = len(tree.resources)
    sums: dict[Path, int] = {}
    for leaf, why in leaves.items():
        if not why[0].startswith("tainted "):
            continue
        amount = sum(max(tree.capacity[leaf * width + c], 0) for c in cols)
        path = tree.leaf_path(leaf)
        for depth in range(1, len(path) + 1):
            sums[path[:depth]] = sums.get(path[:depth], 0) + amount
    return sums
