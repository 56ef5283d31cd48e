"""Where a static cluster state comes from: dump files, or the embedded sample cluster."""

from __future__ import annotations

from collections.abc import Sequence

from webhook.cluster import ClusterState, build_state
from webhook.loader import load
from webhook.sample import sample_objects


def cluster_state(refs: Sequence[str] | None, generation: int = 1) -> ClusterState:
    """The state of the given dumps (files/dirs, any mix of objects), else the sample cluster."""
    if not refs:
        return build_state(sample_objects(), generation)
    return build_state((doc.obj for doc in load(list(refs))), generation)
