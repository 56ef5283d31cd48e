"""Which admitted Workloads' usage a snapshot sees, and that usage taken from (or given back to)
its free capacity through a ledger, never by a rebuild."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scorer import Cluster
from scorer.ledger import FreeLedger
from scorer.model import HOSTNAME_LABEL
from webhook.state.kueue import Flavor, Topology
from webhook.state.workloads import AssignedUse, Scope


def snapshot_scope(
    flavors: Mapping[str, Flavor], topologies: Mapping[str, Topology], key: tuple[object, ...]
) -> Scope:
    """Which assigned usage the snapshot ``key`` (as `ClusterState.snapshots` keys them) sees."""
    levels_of = {
        name: topology.levels
        for name, flavor in flavors.items()
        if (topology := topologies.get(flavor.topology_name or "")) is not None and topology.levels
    }
    hostname = frozenset(name for name, levels in levels_of.items() if levels[-1] == HOSTNAME_LABEL)
    kind, name, levels = key[0], key[1], key[2]
    flavor = str(name) if kind == "flavor" else None
    return Scope(flavor, tuple(levels) if isinstance(levels, tuple) else (), frozenset(levels_of), hostname)


def moved(cluster: Cluster, uses: Iterable[AssignedUse], scope: Scope, generation: int, sign: int) -> Cluster:
    """``cluster`` with the ``uses`` its scope sees taken (``sign`` 1) or given back (-1); the
    same cluster when it sees none of them."""
    ledger = FreeLedger(cluster)
    for use in uses:
        if scope.sees(use):
            ledger.add_domain(use.values, use.requests, sign)
    return ledger.publish(generation)
