"""What Kueue decided for a Workload: its admission per PodSet, the topology assignment expanded.

``workload_admission(workload)`` maps each PodSet to its flavor(s), count and topology assignment.
A v1beta2 ``topologyAssignment`` is compressed into ``slices``; ``expand_topology_assignment``
turns it into one ``(values per level, pod count)`` entry per domain; v1beta1's ``domains`` are
read as they are. The lifecycle tracker compares this with tasgate's own placement, the cluster
state counts admitted assignments as usage (`state.workloads`), and the fidelity suite (e2e/)
reads Kueue's answers with the same code. Pure: plain dicts in, dataclasses
out; a malformed assignment is a ``ValueError`` naming what is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Domain = tuple[tuple[str, ...], int]  # (one value per topology level, pod count)


@dataclass(frozen=True)
class PodSetAdmission:
    """One ``status.admission.podSetAssignments[i]`` of a Workload, with the topology expanded.

    ``levels`` and ``domains`` are empty when Kueue made no topology assignment for the PodSet.
    """

    name: str
    count: int
    flavors: Mapping[str, str]
    levels: tuple[str, ...]
    domains: tuple[Domain, ...]

    @property
    def flavor(self) -> str:
        """The single flavor every resource of the PodSet got (the usual case); error if several."""
        names = set(self.flavors.values())
        if len(names) != 1:
            raise ValueError(f"podset {self.name} has flavors {dict(self.flavors)}, not exactly one")
        return names.pop()

    def pods_at(self, level: str) -> dict[str, int]:
        """Pods per value of topology ``level`` (one of ``levels``), e.g. per hostname."""
        index = self.levels.index(level)
        counts: dict[str, int] = {}
        for values, count in self.domains:
            counts[values[index]] = counts.get(values[index], 0) + count
        return counts


def expand_topology_assignment(assignment: Mapping[str, Any]) -> tuple[tuple[str, ...], list[Domain]]:
    """``(levels, [(values, count), ...])`` of a TopologyAssignment, v1beta2 slices or v1beta1 domains.

    v1beta2 compresses the assignment into ``slices``; the full assignment is their union. In each
    slice, domain ``k`` takes at each level either the ``universal`` value or
    ``prefix + roots[k] + suffix`` of ``individual``, and ``podCounts`` is ``universal`` (same count
    everywhere) or ``individual`` (one per domain). v1beta1 lists ``domains[{values, count}]``.
    """
    levels = tuple(str(level) for level in assignment.get("levels") or ())
    if not levels:
        raise ValueError(f"topologyAssignment has no levels: {dict(assignment)}")
    if "domains" in assignment and "slices" not in assignment:
        domains = [(tuple(map(str, d["values"])), int(d["count"])) for d in assignment["domains"]]
        for values, _ in domains:
            if len(values) != len(levels):
                raise ValueError(f"domain {values} does not have one value per level {levels}")
        return levels, domains
    if not assignment.get("slices"):
        # e.g. a v1beta1 read through CRDs without Kueue's conversion webhook: the API server only
        # relabels the stored v1beta2 object and prunes the fields v1beta1 lacks (slices).
        raise ValueError(f"topologyAssignment has neither slices nor domains: {dict(assignment)}")
    expanded: list[Domain] = []
    for number, piece in enumerate(assignment["slices"]):
        size = int(piece["domainCount"])
        per_level = piece.get("valuesPerLevel") or ()
        if len(per_level) != len(levels):
            raise ValueError(f"slice {number}: {len(per_level)} valuesPerLevel for {len(levels)} levels")
        columns = [_level_values(entry, size, number) for entry in per_level]
        counts = _pod_counts(piece.get("podCounts") or {}, size, number)
        expanded.extend((tuple(column[k] for column in columns), counts[k]) for k in range(size))
    return levels, expanded


def _level_values(entry: Mapping[str, Any], size: int, number: int) -> list[str]:
    if ("universal" in entry) == ("individual" in entry):
        raise ValueError(f"slice {number}: valuesPerLevel entry needs exactly one of universal/individual")
    if "universal" in entry:
        return [str(entry["universal"])] * size
    individual = entry["individual"]
    roots = [str(root) for root in individual.get("roots") or ()]
    if len(roots) != size:
        raise ValueError(f"slice {number}: {len(roots)} roots for domainCount {size}")
    prefix, suffix = individual.get("prefix") or "", individual.get("suffix") or ""
    return [f"{prefix}{root}{suffix}" for root in roots]


def _pod_counts(pod_counts: Mapping[str, Any], size: int, number: int) -> list[int]:
    if ("universal" in pod_counts) == ("individual" in pod_counts):
        raise ValueError(f"slice {number}: podCounts needs exactly one of universal/individual")
    if "universal" in pod_counts:
        return [int(pod_counts["universal"])] * size
    counts = [int(c) for c in pod_counts["individual"]]
    if len(counts) != size:
        raise ValueError(f"slice {number}: {len(counts)} podCounts for domainCount {size}")
    return counts


def condition_true(obj: Mapping[str, Any], kind: str) -> bool:
    """Whether ``status.conditions`` holds ``{type: kind, status: "True"}``."""
    conditions = (obj.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def workload_admission(workload: Mapping[str, Any]) -> dict[str, PodSetAdmission] | None:
    """PodSet name -> its admission, or None while the Workload has no ``status.admission``."""
    admission = (workload.get("status") or {}).get("admission")
    if not admission:
        return None
    result: dict[str, PodSetAdmission] = {}
    for assignment in admission.get("podSetAssignments") or ():
        topology = assignment.get("topologyAssignment")
        levels, domains = expand_topology_assignment(topology) if topology else ((), [])
        name = str(assignment["name"])
        result[name] = PodSetAdmission(
            name=name,
            count=int(assignment.get("count", 0)),
            flavors={str(k): str(v) for k, v in (assignment.get("flavors") or {}).items()},
            levels=levels,
            domains=tuple(domains),
        )
    return result
