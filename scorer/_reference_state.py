"""The pure-Python twin's per-run state and Kueue's orderings (the twin of ``_order.pxd``).

Domains are global indexes; a lower index at the same level is a smaller level-value path,
Kueue's final tie-break, so every sort key ends with the index.
"""

from __future__ import annotations

from scorer.request import GroupRequest
from scorer.tree import Tree

INT32_MAX = 2**31 - 1


class State:
    """Per-run domain counters, Kueue's ``domain.state`` and friends."""

    def __init__(self, tree: Tree, req: GroupRequest) -> None:
        n = tree.level_offsets[-1]
        self.tree = tree
        self.req = req
        self.st = [0] * n
        self.swl = [0] * n
        self.sl = [0] * n
        self.slwl = [0] * n
        self.ld = [0] * n
        self.best_fit = not (req.unconstrained and req.least_free)  # Kueue's useBestFitAlgorithm
        self.leader_count = 1 if len(req.leader_val) else 0

    def children(self, d: int) -> range:
        return range(self.tree.child_start[d], self.tree.child_end[d])

    def sorted_with_leader(self, domains: list[int]) -> list[int]:
        sign = -1 if self.best_fit else 1
        return sorted(domains, key=lambda d: (-self.ld[d], sign * self.slwl[d], self.swl[d], d))

    def sorted_plain(self, domains: list[int]) -> list[int]:
        sign = -1 if self.best_fit else 1
        return sorted(domains, key=lambda d: (sign * self.sl[d], self.st[d], d))

    def best_fit_slices(self, domains: list[int], needed: int, leaders: int) -> int:
        return best_fit(domains, needed, self.slwl if leaders > 0 else self.sl, self.ld, leaders)

    def best_fit_pods(self, domains: list[int], needed: int, leaders: int) -> int:
        return best_fit(domains, needed, self.swl if leaders > 0 else self.st, self.ld, leaders)

    def prioritize_leader(self, domains: list[int], remaining: int, leaders: int, slices: bool) -> list[int]:
        """prioritizeLeaderDomain: the first leader-capable domain whose worker penalty fits the
        slack moves to the front, the others keep their order.

        Placing the leader costs a domain ``prim - with_leader`` workers; the domains' total
        capacity beyond what is still needed is the slack that can absorb it (Kueue #13383).
        Kueue reorders once, then walks the list: best fit replaces the front domain only when
        that domain alone completes the group (consumeWithLeadersGeneric).
        """
        if leaders == 0 or len(domains) < 2:
            return domains
        prim, wl = (self.sl, self.slwl) if slices else (self.st, self.swl)
        slack = sum(prim[d] for d in domains) - remaining
        for i, d in enumerate(domains):
            if self.ld[d] >= leaders and prim[d] - wl[d] <= slack:
                return [d, *domains[:i], *domains[i + 1 :]]
        return domains


def best_fit(domains: list[int], needed: int, values: list[int], ld: list[int], leaders: int) -> int:
    """The first domain with the smallest value still >= needed (holding the leader, if one
    is still to place), else the first domain."""
    best = domains[0]
    found = False
    best_value = 0
    for d in domains:
        v = values[d]
        if v >= needed and ld[d] >= leaders and (not found or v < best_value):
            best, best_value, found = d, v, True
    return best
