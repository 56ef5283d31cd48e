"""Where a static cluster state comes from: dump files, or the embedded sample cluster.

An object of a dump that tasgate cannot use is left out of the state alone (`state.rejected`)
and named on stderr once per state read, so a person handing over files learns why the
workloads that depend on it are "not checked", and everything else is judged as usual.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

from scorer import Engine
from webhook.files.loader import load
from webhook.files.sample import sample_objects
from webhook.state.cluster import ClusterState, build_state
from webhook.state.rejected import Rejected


def cluster_objects(refs: Sequence[str] | None) -> list[Mapping[str, Any]]:
    """The objects of the given dumps (files/dirs, any mix of kinds), else the sample cluster's."""
    if not refs:
        return list(sample_objects())
    return [doc.obj for doc in load(list(refs))]


def cluster_state(
    refs: Sequence[str] | None, generation: int = 1, engine: Engine | None = None
) -> ClusterState:
    """The state of the given dumps (else the sample cluster), its left-out objects warned about."""
    state = build_state(cluster_objects(refs), generation, engine)
    warn_rejected(state.rejected)
    return state


def warn_rejected(rejected: Iterable[Rejected], stream: TextIO | None = None) -> None:
    """One stderr line per object left out of a state read once (files, or one list of a cluster)."""
    out = sys.stderr if stream is None else stream
    for found in rejected:
        print(f"tasgate: warning: {found.subject} left out of the cluster state: {found.why}", file=out)
