"""Per-node checks Kueue makes when hosts are the leaves: taints, nodeSelector, affinity."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scorer.model import Node, SelectorRequirement, SelectorTerm, Taint, Toleration


def first_untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """corev1helpers.FindMatchingUntoleratedTaint over scheduling taints, in node order."""
    for taint in taints:
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def selector_matches(node: Node, selector: Mapping[str, str]) -> bool:
    labels = node.labels
    return all(labels.get(k) == v for k, v in selector.items())


def affinity_matches(node: Node, terms: Sequence[SelectorTerm]) -> bool:
    """nodeaffinity.NodeSelector.Match: terms ORed; an empty term matches nothing."""
    return any(_term_matches(node, term) for term in terms)


def _term_matches(node: Node, term: SelectorTerm) -> bool:
    if not term.match_expressions and not term.match_fields:
        return False
    fields = {"metadata.name": node.name}
    return all(_requirement_matches(node.labels, r) for r in term.match_expressions) and all(
        _requirement_matches(fields, r) for r in term.match_fields
    )


def _requirement_matches(labels: Mapping[str, str], req: SelectorRequirement) -> bool:
    value = labels.get(req.key)
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(req.values) == 1:
        try:
            have, want = int(value), int(req.values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False
