"""`tasgate map`: the topology picture offline, from the same sources as `tasgate check`.

The waiting gangs are the workloads given with ``-f`` that would be told to wait (judged by the
same decision path as `check`); without ``-f`` the picture has none. Text (a compact tree) by
default, ``-o html`` for the self-contained page `/topology` serves.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from webhook.cli import check
from webhook.decide.fragmentation import cluster_figures
from webhook.decide.policy import Policy
from webhook.decide.waiting import WaitingGang, waiting_gang
from webhook.files.loader import Document, LoadFailure
from webhook.present.html import render_html
from webhook.present.text import render_text
from webhook.state.cluster import ClusterState

EXIT_OK, EXIT_ERROR = 0, 2


def run(
    state: ClusterState,
    policy: Policy,
    inputs: Sequence[Document | LoadFailure],
    namespace: str,
    output: str,
    title: str,
) -> int:
    results = check.check_all(inputs, state, policy, namespace)
    for failed in (r for r in results if r.outcome == "error"):
        print(f"tasgate: error: {failed.source}: {failed.error}", file=sys.stderr)
    waiting = _waiting(results, policy)
    figures = cluster_figures(state, policy, per_domain=True)
    if output == "html":
        sys.stdout.write(render_html(figures, waiting, title))
    else:
        sys.stdout.write(render_text(figures, waiting))
    return EXIT_ERROR if any(r.outcome == "error" for r in results) else EXIT_OK


def _waiting(results: Sequence[check.Result], policy: Policy) -> list[WaitingGang]:
    """One gang per workload: a workload given twice is the last one given (as the server keeps it)."""
    found: dict[tuple[str, str, str], WaitingGang] = {}
    for r in results:
        gang = waiting_gang(r.decision, policy.gpu_resources) if r.decision is not None else None
        if gang is not None:
            found.pop(gang.key, None)
            found[gang.key] = gang
    return list(found.values())
