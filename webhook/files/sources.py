"""Where a static cluster state comes from: dump files, or the embedded sample cluster."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scorer import Engine
from webhook.files.loader import load
from webhook.files.sample import sample_objects
from webhook.state.cluster import ClusterState, build_state


def cluster_objects(refs: Sequence[str] | None) -> list[Mapping[str, Any]]:
    """The objects of the given dumps (files/dirs, any mix of kinds), else the sample cluster's."""
    if not refs:
        return list(sample_objects())
    return [doc.obj for doc in load(list(refs))]


def cluster_state(
    refs: Sequence[str] | None, generation: int = 1, engine: Engine | None = None
) -> ClusterState:
    return build_state(cluster_objects(refs), generation, engine)
