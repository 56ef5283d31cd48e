"""`tasgate map`: the topology picture offline, from the same sources as `tasgate check`.

The waiting gangs are the workloads given with ``-f`` that would be told to wait (judged by the
same decision path as `check`); without ``-f`` the picture has none. Text (a compact tree) by
default, ``-o html`` for the self-contained page `/topology` serves (stamped with the time it was
written, without the live page's reload).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import UTC, datetime

from webhook.cli import check
from webhook.decide.policy import Policy
from webhook.figures.fragmentation import cluster_figures
from webhook.figures.waiting import WaitingGang, waiting_gang
from webhook.files.loader import Document, LoadFailure
from webhook.present.html import render_html
from webhook.present.stamp import Stamp
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
        sys.stdout.write(render_html(figures, waiting, title, Stamp(state.generation, now_text())))
    else:
        sys.stdout.write(render_text(figures, waiting))
    return EXIT_ERROR if any(r.outcome == "error" for r in results) else EXIT_OK


def now_text() -> str:
    """The page's timestamp: UTC, to the second (a file has no reload: no refresh)."""
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _waiting(results: Sequence[check.Result], policy: Policy) -> list[WaitingGang]:
    """One gang per workload: a workload given twice is the last one given (as the server keeps it)."""
    found: dict[tuple[str, str, str], WaitingGang] = {}
    for r in results:
        gang = waiting_gang(r.decision, policy.gpu_resources) if r.decision is not None else None
        if gang is not None:
            found.pop(gang.key, None)
            found[gang.key] = gang
    return list(found.values())
