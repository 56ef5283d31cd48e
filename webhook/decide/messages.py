"""What tasgate says to people: deny messages in numbers, short warnings, resource summaries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scorer.model import HOSTNAME_LABEL, PODS, Placement
from webhook.model.quantity import format_quantity

WARNING_LIMIT = 120
HEADLINE_FALLBACK = ("cpu", "memory")


def short_level(level: str) -> str:
    """`cloud.provider.com/topology-rack` reads as "rack"; hostname as "node"."""
    if level == HOSTNAME_LABEL:
        return "node"
    tail = level.rsplit("/", 1)[-1]
    for prefix in ("topology-", "topology."):
        if tail.startswith(prefix):
            return tail[len(prefix) :]
    return tail


def request_summary(requests: Mapping[str, int], gpu_resources: Sequence[str]) -> str:
    """The resources that decide placement: accelerators if any, else cpu and memory."""
    names = [r for r in requests if r in gpu_resources or ("/" in r and r != PODS)]
    if not names:
        names = [r for r in HEADLINE_FALLBACK if r in requests]
    if not names:
        return "no resources"
    return ", ".join(f"{r}: {format_quantity(r, requests[r])}" for r in sorted(names))


def never_fits(
    pod_set: str,
    count: int,
    summary: str,
    level: str,
    never: Placement,
    limiting: str | None,
    whole_topology: int | None,
    spreads: bool = False,
) -> str:
    """The deny message: the request, the level, the best domain and what it holds, what would fit.

    ``spreads``: the request may spread over domains (preferred, unconstrained, implied), so
    only the whole topology's capacity is the limit worth naming.
    """
    head = f'PodSet "{pod_set}" ({count} pods × {summary})'
    if spreads and whole_topology is not None:
        return (
            f"{head} can never be placed: the whole topology holds only {whole_topology} such pods "
            f"even when empty; ask for at most {whole_topology}."
        )
    table = never.levels
    row = never.level_row(level)
    if row is None or not table:
        return f"{head} can never be placed: {never.reason}"
    unit = "such pods" if never.unit == "pod" else "slices"
    held = row.max_pods if never.unit == "pod" else row.max_slices
    limited = f" (limited by {limiting})" if limiting else ""
    largest = f"the largest {short_level(level)} holds {held} {unit} even when empty{limited}"
    index = [r.level for r in table].index(level)
    looser = next((r for r in reversed(table[:index]) if r.fitting_domains > 0), None)
    if looser is not None:
        hint = (
            f' A "{looser.level}" domain holds {looser.max_pods}; use that level, '
            f"podset-preferred-topology, or at most {row.max_pods} pods."
        )
    elif whole_topology is not None and whole_topology >= count:
        hint = (
            " No single domain holds it; use podset-preferred-topology to spread,"
            f" or at most {row.max_pods} pods."
        )
    else:
        total = whole_topology if whole_topology is not None else table[0].max_pods
        hint = f" The whole topology holds only {total} such pods even when empty; ask for at most {total}."
    return f'{head} can never fit one "{level}" domain: {largest}.{hint}'


def waits(pod_set: str, count: int, level: str, now: Placement) -> str:
    """A warning (≤120 chars): fits the empty cluster, not the current free capacity."""
    row = now.level_row(level)
    free = row.max_pods if row else now.fit_count
    missing = max(count - free, 0)
    text = (
        f'PodSet "{pod_set}" must wait: the best {short_level(level)} has room for {free} of {count} pods '
        f"now ({missing} short); it fits when capacity frees up"
    )
    return clip(text)


def clip(text: str, limit: int = WARNING_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
