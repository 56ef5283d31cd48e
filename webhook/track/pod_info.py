"""Which gang and which domains each running pod belongs to: the rows of ``tasgate_pod_info``.

GPU exporters (NVIDIA's dcgm-exporter in Kubernetes mode) label a GPU's series with the ``pod``
and ``namespace`` using it, and know nothing of gangs or racks. One join series per running pod,
``{namespace, pod, gang, <one label per Topology level>}``, lets a PromQL ``group_left`` carry the
gang and its domains onto those series (docs/monitoring.md, "GPU signals per gang and domain").

The level labels are named from the level keys (``level_labels``): the last word of the key,
``cloud.provider.com/topology-rack`` -> ``rack``, ``kubernetes.io/hostname`` -> ``hostname``;
the whole key sanitised and prefixed (``level_cloud_provider_com_topology_rack``) when two levels
would share a word or the word is a label the join or Prometheus itself needs. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from webhook.state.cluster import ClusterState
from webhook.track.classify import State
from webhook.track.ledger import Tracked
from webhook.track.quality import topology_levels

HOSTNAME = "kubernetes.io/hostname"
# The join's own labels, the scrape's target labels and Prometheus' special ones: never a level's.
RESERVED = frozenset(
    {"namespace", "pod", "gang", "job", "instance", "container", "endpoint", "service", "le", "quantile"}
)


@dataclass(frozen=True)
class PodInfo:
    """One running pod of a tracked gang, with its labels as exported (level labels by name)."""

    namespace: str
    pod: str
    gang: str
    domains: tuple[tuple[str, str], ...]  # (label name, the node's value for that level), coarse first

    @property
    def labels(self) -> dict[str, str]:
        return {"namespace": self.namespace, "pod": self.pod, "gang": self.gang, **dict(self.domains)}


def level_labels(levels: Sequence[str]) -> dict[str, str]:
    """Topology level key -> its label name on ``tasgate_pod_info`` (see the module's docstring)."""
    words = [_sanitise(level.rsplit("/", 1)[-1].rsplit("-", 1)[-1]).lower() for level in levels]
    out = {}
    for level, word in zip(levels, words, strict=True):
        clash = not word or word[0].isdigit() or word.startswith("__") or word in RESERVED
        out[level] = "level_" + _sanitise(level) if clash or words.count(word) > 1 else word
    return out


def pod_infos(tracked: Iterable[Tracked], state: ClusterState | None) -> list[PodInfo]:
    """Every Running, bound pod of every tracked gang not finished, sorted; a gang without a TAS
    flavor gets no level labels (its ``gang`` still joins)."""
    gangs = [t for t in tracked if t.status.state is not State.FINISHED]
    if not gangs:
        return []
    nodes = {n.name: n.labels for n in state.nodes} if state is not None else {}
    out = []
    for t in gangs:
        wl = t.gang.workload
        gang = wl.owner.name if wl.owner else wl.name
        names = level_labels(topology_levels(wl, state))
        for p in t.gang.pods:
            if p.phase != "Running" or p.node is None:
                continue
            domains = tuple(
                (name, _value(nodes.get(p.node, {}), level, p.node)) for level, name in names.items()
            )
            out.append(PodInfo(p.namespace, p.name, gang, domains))
    return sorted(out, key=lambda row: (row.namespace, row.pod))


def _value(labels: Mapping[str, str], level: str, node: str) -> str:
    """The node's value for ``level``; a node without the hostname label is its name, as Kueue reads it."""
    return labels.get(level, node if level == HOSTNAME else "")


def _sanitise(text: str) -> str:
    """A Prometheus label name's characters: ``[a-zA-Z0-9_]``, anything else ``_``."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", text)
