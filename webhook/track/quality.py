"""How well a running gang landed: the domains its pods occupy, judged against what it asked for.

Kueue's TopologyAssignment says where it *meant* the pods to go; this reads where they *are*
(each pod's bound node, that node's labels for the Topology's levels), so a gang whose pods were
recreated outside the assignment shows. Pure: the node labels and the levels are passed in.

One verdict per gang, by the PodSets of its strictest mode (a JobSet's required workers decide,
not its preferred driver):

- ``required``: every such PodSet's pods sit in one domain of its level, else ``violated``;
- ``preferred``: ``met`` when every such PodSet fits one domain of its level, else ``spread``,
  with the lowest level where the gang's pods do share one domain (``fits_level``);
- ``unconstrained`` (Kueue's ``unconstrained: true``, or a TAS flavor and no request): no
  verdict, only the domains spanned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from webhook.state.cluster import ClusterState
from webhook.track.records import PodRecord, WorkloadRecord

MODES = ("required", "preferred", "unconstrained")
RESULTS = ("met", "spread", "violated")
Labels = Mapping[str, Mapping[str, str]]  # node name -> its labels


@dataclass(frozen=True)
class Placement:
    mode: str  # one of MODES
    result: str | None  # one of RESULTS; None for unconstrained
    spanned: Mapping[str, int]  # level -> distinct domains of that level the pods occupy
    domains: Mapping[str, tuple[str, ...]]  # level -> the domains (label values), sorted
    fits_level: str | None  # the lowest level whose one domain holds every pod (None: none does)
    detail: str = ""  # for a violation: which PodSet, where

    def text(self, levels: Sequence[str]) -> str:
        """``rack=r0,r1 block=b0``: every level but the lowest (hosts), for a table cell."""
        shown = [lv for lv in levels[:-1] if lv in self.domains] or list(self.domains)
        return " ".join(f"{_short(lv)}={','.join(self.domains[lv])}" for lv in shown)


def placement(
    wl: WorkloadRecord, pods: Sequence[PodRecord], levels: Sequence[str], labels: Labels
) -> Placement | None:
    """The placement of a running gang's bound pods; None when it has no topology to judge by."""
    bound = [p for p in pods if p.node is not None and p.phase in ("Running", "Succeeded")]
    if not levels or not bound:
        return None
    domains = {lv: sorted(_values(bound, lv, levels, labels)) for lv in levels}
    spanned = {lv: len(values) for lv, values in domains.items()}
    fits = next((lv for lv in reversed(levels) if spanned[lv] == 1), None)
    modes = {mode for mode, _ in wl.requests.values()}
    mode = next((m for m in MODES if m in modes), "unconstrained")
    result: str | None = None
    detail = ""
    if mode != "unconstrained":
        result = "met"
        for name, (asked, level) in sorted(wl.requests.items()):
            own = [p for p in bound if p.podset == name] if any(p.podset for p in bound) else bound
            if asked != mode or level not in levels or not own:  # judged by its strictest PodSets
                continue
            held = sorted(_values(own, level, levels, labels))
            if len(held) > 1:
                if asked == "required":
                    result = "violated"
                    detail = f"PodSet {name} requires one {level} domain; its pods are in {', '.join(held)}"
                elif result == "met":
                    result = "spread"
    frozen = {lv: tuple(values) for lv, values in domains.items()}
    return Placement(mode, result, spanned, frozen, fits, detail)


def topology_levels(record: WorkloadRecord, state: ClusterState | None) -> tuple[str, ...]:
    """The levels of the Topology of the flavor Kueue admitted the gang to (none: no TAS); a
    native gang's own topology key."""
    if record.levels:
        return record.levels
    if state is None or not record.admission:
        return ()
    for assigned in record.admission.values():
        for name in assigned.flavors.values():
            flavor = state.flavors.get(name)
            topology = state.topologies.get(flavor.topology_name or "") if flavor is not None else None
            if topology is not None:
                return topology.levels
    return ()


def _values(pods: Sequence[PodRecord], level: str, levels: Sequence[str], labels: Labels) -> set[str]:
    """The domains of ``level`` the pods' nodes are in; a node without the label counts by name
    (the lowest level is the hostname, whose label some nodes lack)."""
    out = set()
    for p in pods:
        node = p.node or ""
        value = labels.get(node, {}).get(level)
        out.add(value if value is not None else ("node:" + node if level == levels[-1] else "?"))
    return out


def _short(level: str) -> str:
    """``cloud.provider.com/topology-rack`` → ``rack``: the last word of the label."""
    return level.rsplit("/", 1)[-1].rsplit("-", 1)[-1]
