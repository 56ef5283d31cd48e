"""The kube-scheduler v1.36.5's own placement unit cases, run through the scorer's native mode.

The table (``native_cases/kube_scheduler_v1.36.5.yaml``) cites the Go tests it copies. Every
case runs on each native engine (compiled and its pure-Python twin).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scorer.model import Node
from scorer.native import NativeRequest, bound_domain, native_engines, place_native

TABLE = yaml.safe_load((Path(__file__).parent / "native_cases" / "kube_scheduler_v1.36.5.yaml").read_text())
ENGINES = sorted(native_engines())


def _nodes(raw: list[dict[str, Any]]) -> list[Node]:
    """Node i holds 2**i pods, so a domain's capacity names exactly the nodes it groups."""
    return [
        Node(n["name"], n.get("labels", {}), {"pods": 2**i, "cpu": 1000, "memory": 1 << 30})
        for i, n in enumerate(raw)
    ]


def _members(capacity: int, names: list[str]) -> list[str]:
    return [name for i, name in enumerate(names) if capacity >> i & 1]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(TABLE["generate"]))
def test_generate_placements(name: str, engine: str) -> None:
    case = TABLE["generate"][name]
    placement = case["placementNodes"]
    everywhere = {n["name"]: n.get("labels", {}) for n in placement + case.get("otherNodes", [])}
    bound = list(case.get("scheduled", {}).values())
    key = case["key"]
    domain = bound_domain(everywhere, key, bound) if key is not None else None
    if case.get("error"):
        assert domain == ""  # the plugin's error: no domain for the bound pods
    req = NativeRequest("pg1", 10**6, 1, {}, key, scheduled=len(bound), bound_domain=domain)
    found = place_native(_nodes(placement), req, None, empty=True, engine=native_engines()[engine])
    names = [n["name"] for n in placement]
    got = {d.value: _members(d.capacity, names) for d in found.domains if d.feasible}
    assert got == ({} if case.get("error") else case["want"])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(TABLE["scorePlacement"]))
def test_score_placement(name: str, engine: str) -> None:
    """ScorePlacement = bound (assigned + assumed) + proposed; the mode proposes what fits."""
    case = TABLE["scorePlacement"][name]
    scheduled = case["assigned"] + case["assumed"]
    nodes = [Node(f"node{i}", {"k": "d"}, {"pods": 1, "cpu": 1000, "memory": 1 << 30}) for i in (1, 2)]
    req = NativeRequest("pg1", case["proposed"], 1, {}, "k", scheduled=scheduled, bound_domain="d")
    found = place_native(nodes, req, None, empty=True, engine=native_engines()[engine])
    (domain,) = found.domains
    assert scheduled + domain.placed == case["expected"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(TABLE["normalize"]))
def test_normalize_placement_score(name: str, engine: str) -> None:
    """One domain per raw score, holding that many pods: PodGroupPodsCount as normalised."""
    case = TABLE["normalize"][name]
    nodes = [
        Node(f"n{i}", {"k": f"d{i:02d}"}, {"pods": score, "cpu": 1000, "memory": 1 << 30})
        for i, score in enumerate(case["scores"])
    ]
    req = NativeRequest("pg1", max(case["scores"]) or 1, 1, {}, "k")
    found = place_native(nodes, req, None, empty=True, engine=native_engines()[engine])
    by_value = {d.value: d for d in found.domains}
    if case.get("error"):
        assert not found.fits and not any(d.feasible for d in found.domains)
        return
    assert [by_value[f"d{i:02d}"].pods_score for i in range(len(nodes))] == case["expected"]
