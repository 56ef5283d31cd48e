"""Kueue's own failure texts, word for word, built from an engine's numbers."""

from __future__ import annotations

from collections.abc import Sequence

from scorer.request import RawResult


def go_quote(text: str) -> str:
    """Go's %q for the plain strings that appear here (names, labels, taints)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    escaped = escaped.replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


Exclusion = tuple[str, int]  # (Kueue's reason, e.g. 'taint "k=v:NoSchedule"', and its node count)


def exclusions(
    raw: RawResult, taint_names: Sequence[str], resource_names: Sequence[str]
) -> tuple[Exclusion, ...]:
    """Why nodes were left out, Kueue's reasons in Kueue's (sorted) order."""
    taints: dict[str, int] = {}
    for cls, n in enumerate(raw.taint_counts):
        if n:
            taints[taint_names[cls]] = taints.get(taint_names[cls], 0) + n
    reasons = [(f"taint {go_quote(t)}", n) for t, n in taints.items()]
    reasons += [
        (f"resource {go_quote(resource_names[k])}", n) for k, n in enumerate(raw.resource_counts) if n
    ]
    if raw.selector_count:
        reasons.append(("nodeSelector", raw.selector_count))
    if raw.affinity_count:
        reasons.append(("affinity", raw.affinity_count))
    return tuple(sorted(reasons, key=lambda r: f"{r[0]}: {r[1]}"))


def exclusion_suffix(total_nodes: int, excluded: Sequence[Exclusion]) -> str:
    """``. Total nodes: N; excluded: a: 1, b: 2``, or nothing."""
    if not excluded:
        return ""
    return f". Total nodes: {total_nodes}; excluded: {', '.join(f'{r}: {n}' for r, n in excluded)}"


def not_fit_message(topology: str, fit: int, total: int, slice_size: int, suffix: str) -> str:
    unit = "pod" if slice_size == 1 else "slice"
    if fit == 0:
        head = f"topology {go_quote(topology)} doesn't allow to fit any of {total} {unit}(s)"
    else:
        head = f"topology {go_quote(topology)} allows to fit only {fit} out of {total} {unit}(s)"
    return head + suffix


def multi_layer_message(
    topology: str, count: int, layers: Sequence[tuple[str, int]], fits: Sequence[int], suffix: str
) -> str:
    parts = [f"topology {go_quote(topology)} doesn't allow to fit"]
    for (level, size), fit in zip(layers, fits, strict=True):
        parts.append(f"; {fit}/{count // size} slice(s) fit on level {level}")
    return "".join(parts) + suffix


def no_domains_message(level: str) -> str:
    return f"no topology domains at level: {level}"
