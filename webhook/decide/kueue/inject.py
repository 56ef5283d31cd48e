"""What a policy rule adds to a workload the user left unannotated: TAS annotations.

Annotations the user wrote are kept as they are; only PodSets with no TAS annotation at all
get one, and not a PodSet whose template carries a near-miss of a topology key (misspelt, or
written as a label): the user asked for some placement there, and the policy does not guess
which. "tightest" means the deepest level whose largest domain can hold the PodSet (or the
leader+workers group) in the empty cluster, bounded by the rule's loosest allowed level.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scorer.model import Mode, PodSetRequest, TopologyRequest
from webhook.decide import messages
from webhook.decide.kueue.topology import Target
from webhook.decide.patch import Entry, Removal
from webhook.decide.policy import TIGHTEST, Inject
from webhook.model import annotations as ann
from webhook.model.podset import PodSetView
from webhook.rules import topology_near_misses

GROUP_NAME = "tasgate-leader-workers"


@dataclass(frozen=True)
class Plan:
    requests: tuple[TopologyRequest, ...]  # the effective request of each PodSet
    injected: tuple[bool, ...]
    entries: tuple[Entry | Removal, ...]
    problems: tuple[str, ...] = ()


def plan(pod_sets: Sequence[PodSetView], inject: Inject | None, target: Target | None) -> Plan:
    written = tuple(p.request for p in pod_sets)
    # A template the object does not hold (RayJob's default submitter) cannot be annotated.
    bare = [i for i, r in enumerate(written) if _unannotated(r) and not pod_sets[i].pod_set.synthesized]
    if inject is None or inject.mode == "none" or not bare or target is None:
        return Plan(_implied(written), (False,) * len(written), ())
    bare, held = _hold_near_misses(pod_sets, bare)
    if not bare:
        return Plan(_implied(written), (False,) * len(written), (), held)
    group = GROUP_NAME if inject.group_leader_workers and _leader_workers(pod_sets, bare) else None
    level, problem = _level(pod_sets, bare, inject, target, group)
    problems = (*held, *((problem,) if problem else ()))
    if level is None:
        return Plan(_implied(written), (False,) * len(written), (), problems)
    mode = Mode.REQUIRED if inject.mode == "required" else Mode.PREFERRED
    key = ann.REQUIRED_TOPOLOGY if mode is Mode.REQUIRED else ann.PREFERRED_TOPOLOGY
    requests = list(_implied(written))
    entries: list[Entry | Removal] = []
    for i in bare:
        requests[i] = TopologyRequest(mode, level, group=group)
        path = (*pod_sets[i].pod_set.template_path, "metadata", "annotations")
        entries.append(Entry(path, key, level))
        if group:
            # Kueue's webhook (it runs first) wrote pod-index-offset because no group was set;
            # with the group its ungater offsets the workers itself, so the offset would count
            # twice (``topology_ungater.go``): it goes, as if the user had written the group.
            entries += [Entry(path, ann.GROUP_NAME, group), Removal(path, ann.POD_INDEX_OFFSET)]
    injected = tuple(i in bare for i in range(len(written)))
    return Plan(tuple(requests), injected, tuple(entries), problems)


def _hold_near_misses(
    pod_sets: Sequence[PodSetView], bare: Sequence[int]
) -> tuple[list[int], tuple[str, ...]]:
    """The unannotated PodSets still to inject, and a warning for each one held back because its
    template carries a near-miss of a topology key (Kueue ignores it; the user meant something)."""
    keep, held = [], []
    for i in bare:
        misses = topology_near_misses(pod_sets[i].pod_set.template)
        if misses:
            held.append(messages.near_miss_held(pod_sets[i].name, misses))
        else:
            keep.append(i)
    return keep, tuple(held)


def _unannotated(req: TopologyRequest) -> bool:
    return req.mode is Mode.NONE and req.slice_level is None and not req.slice_layers and req.group is None


def _implied(requests: Sequence[TopologyRequest]) -> tuple[TopologyRequest, ...]:
    """Kueue places an unannotated PodSet of a TAS flavor as "implied" (lowest level, spread)."""
    return tuple(TopologyRequest(Mode.IMPLIED) if _unannotated(r) else r for r in requests)


def _leader_workers(pod_sets: Sequence[PodSetView], bare: Sequence[int]) -> bool:
    """A leader (count 1) and its workers, both unannotated, to be placed as one group."""
    return len(pod_sets) == 2 and len(bare) == 2 and min(p.count for p in pod_sets) == 1


def _level(
    pod_sets: Sequence[PodSetView], bare: Sequence[int], inject: Inject, target: Target, group: str | None
) -> tuple[str | None, str | None]:
    levels = target.topology.levels
    if inject.loosest_level is not None and inject.loosest_level not in levels:
        return (
            None,
            f'policy level "{inject.loosest_level}" is not a level of Topology "{target.topology.name}"',
        )
    if inject.level != TIGHTEST:
        if inject.level not in levels:
            return None, f'policy level "{inject.level}" is not a level of Topology "{target.topology.name}"'
        return inject.level, None
    tightest = tightest_level(pod_sets, bare, target, group)
    if inject.loosest_level is not None and (
        tightest is None or levels.index(tightest) < levels.index(inject.loosest_level)
    ):
        return inject.loosest_level, None  # even the loosest allowed level cannot hold it: denied
    if tightest is None:
        # No single domain can ever hold it: a required level would turn a workload Kueue can
        # spread into one that never runs. Leave it to Kueue, and say so.
        return None, f'no single "{levels[0]}" domain holds this gang; no topology annotation added'
    return tightest, None


def tightest_level(
    pod_sets: Sequence[PodSetView], bare: Sequence[int], target: Target, group: str | None
) -> str | None:
    """The deepest level with a domain that holds every PodSet to inject, when empty; None if none."""
    levels = target.topology.levels
    probe = TopologyRequest(Mode.REQUIRED, levels[0], group=group)
    requests: list[PodSetRequest] = [pod_sets[i].scorer_request(probe) for i in bare]
    placements = target.snapshot.never.place(requests)
    best = None
    for depth in range(len(levels)):
        if all(p.levels and p.levels[depth].fitting_domains > 0 for p in placements):
            best = depth
    return None if best is None else levels[best]
