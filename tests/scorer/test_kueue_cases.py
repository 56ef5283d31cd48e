"""Kueue's own TAS placement tests, ported as data, run against every scorer engine.

Each file under ``kueue_cases/`` holds the cases of one Kueue Go test file (facts and expected
results copied from Kueue, default feature gates of v0.19 only). A case describes the nodes of
one TAS flavor and the PodSets of one workload; the PodSets are placed in order, and every
PodSet listed under ``want`` must get exactly Kueue's answer: the same assignment levels and
domains in the same order when it fits, the same reason text when it does not. PodSets that
``want`` does not list are placed but not checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

import scorer
from scorer import Cluster
from scorer.model import (
    Mode,
    Node,
    Placement,
    PodSetRequest,
    SelectorRequirement,
    SelectorTerm,
    SliceLayer,
    Taint,
    Toleration,
    TopologyRequest,
)

CASES_DIR = Path(__file__).parent / "kueue_cases"
ENGINE_NAMES = ("compiled", "reference")

_CASE_KEYS = frozenset(
    {"name", "source", "note", "topology", "levels", "flavorNodeLabels", "flavorTolerations", "nodes"}
    | {"podSets", "want"}
)
_CASE_REQUIRED = frozenset({"name", "source", "topology", "levels", "nodes", "podSets", "want"})
_NODE_KEYS = frozenset({"name", "labels", "allocatable", "taints", "ready", "unschedulable", "usage"})
_POD_SET_KEYS = frozenset(
    {"name", "count", "requests", "mode", "level", "sliceLevel", "sliceSize", "sliceLayers", "group"}
    | {"tolerations", "nodeSelector", "affinity"}
)
_LAYER_KEYS = frozenset({"level", "size"})
_TAINT_KEYS = frozenset({"key", "value", "effect"})
_TOLERATION_KEYS = frozenset({"key", "operator", "value", "effect"})
_TERM_KEYS = frozenset({"matchExpressions", "matchFields"})
_REQUIREMENT_KEYS = frozenset({"key", "operator", "values"})
_WANT_FIT_KEYS = frozenset({"fits", "levels", "domains"})
_WANT_FAIL_KEYS = frozenset({"fits", "reason"})


class CaseFormatError(ValueError):
    """A case file does not follow the format described in this module."""


def _mapping(raw: Any, allowed: frozenset[str], where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise CaseFormatError(f"{where}: expected a mapping, got {type(raw).__name__}")
    unknown = set(raw) - allowed
    if unknown:
        raise CaseFormatError(f"{where}: unknown keys {sorted(unknown)}")
    return raw


def _resources(raw: Any, where: str) -> dict[str, int]:
    if not isinstance(raw, Mapping):
        raise CaseFormatError(f"{where}: expected a mapping of resource amounts")
    out: dict[str, int] = {}
    for name, amount in raw.items():
        if not isinstance(amount, int) or isinstance(amount, bool):
            raise CaseFormatError(f"{where}: {name} must be an integer in canonical units, got {amount!r}")
        out[str(name)] = amount
    return out


def _labels(raw: Any, where: str) -> dict[str, str]:
    if not isinstance(raw, Mapping) or not all(isinstance(v, str) for v in raw.values()):
        raise CaseFormatError(f"{where}: expected a mapping of strings")
    return {str(k): v for k, v in raw.items()}


def _taint(raw: Any, where: str) -> Taint:
    t = _mapping(raw, _TAINT_KEYS, where)
    return Taint(key=t["key"], effect=t["effect"], value=t.get("value", ""))


def _toleration(raw: Any, where: str) -> Toleration:
    t = _mapping(raw, _TOLERATION_KEYS, where)
    return Toleration(
        key=t.get("key", ""),
        operator=t.get("operator", "Equal"),
        value=t.get("value", ""),
        effect=t.get("effect", ""),
    )


def _requirements(raw: Any, where: str) -> tuple[SelectorRequirement, ...]:
    out = []
    for i, item in enumerate(raw or ()):
        r = _mapping(item, _REQUIREMENT_KEYS, f"{where}[{i}]")
        out.append(
            SelectorRequirement(key=r["key"], operator=r["operator"], values=tuple(r.get("values", ())))
        )
    return tuple(out)


def _affinity(raw: Any, where: str) -> tuple[SelectorTerm, ...] | None:
    if raw is None:
        return None
    terms = []
    for i, item in enumerate(raw):
        term = _mapping(item, _TERM_KEYS, f"{where}[{i}]")
        terms.append(
            SelectorTerm(
                match_expressions=_requirements(
                    term.get("matchExpressions"), f"{where}[{i}].matchExpressions"
                ),
                match_fields=_requirements(term.get("matchFields"), f"{where}[{i}].matchFields"),
            )
        )
    return tuple(terms)


def build_node(raw: Any, where: str) -> Node:
    n = _mapping(raw, _NODE_KEYS, where)
    return Node(
        name=n["name"],
        labels=_labels(n["labels"], f"{where}.labels"),
        allocatable=_resources(n["allocatable"], f"{where}.allocatable"),
        taints=tuple(_taint(t, f"{where}.taints[{i}]") for i, t in enumerate(n.get("taints", ()))),
        ready=bool(n.get("ready", True)),
        unschedulable=bool(n.get("unschedulable", False)),
        usage=_resources(n.get("usage", {}), f"{where}.usage"),
    )


def build_pod_set(raw: Any, where: str) -> PodSetRequest:
    p = _mapping(raw, _POD_SET_KEYS, where)
    layers = []
    for i, item in enumerate(p.get("sliceLayers", ())):
        layer = _mapping(item, _LAYER_KEYS, f"{where}.sliceLayers[{i}]")
        layers.append(SliceLayer(level=layer["level"], size=layer["size"]))
    topology = TopologyRequest(
        mode=Mode(p["mode"]),
        level=p.get("level"),
        slice_level=p.get("sliceLevel"),
        slice_size=p.get("sliceSize"),
        slice_layers=tuple(layers),
        group=p.get("group"),
    )
    return PodSetRequest(
        name=p["name"],
        count=p["count"],
        requests=_resources(p["requests"], f"{where}.requests"),
        topology=topology,
        tolerations=tuple(
            _toleration(t, f"{where}.tolerations[{i}]") for i, t in enumerate(p.get("tolerations", ()))
        ),
        node_selector=_labels(p.get("nodeSelector", {}), f"{where}.nodeSelector"),
        affinity=_affinity(p.get("affinity"), f"{where}.affinity"),
    )


def build_cluster(case: Mapping[str, Any]) -> Cluster:
    where = case["name"]
    nodes = [build_node(n, f"{where}: nodes[{i}]") for i, n in enumerate(case["nodes"])]
    tolerations = tuple(
        _toleration(t, f"{where}: flavorTolerations[{i}]")
        for i, t in enumerate(case.get("flavorTolerations", ()))
    )
    extra: dict[str, Any] = {}
    if "flavorNodeLabels" in case:  # the ResourceFlavor's nodeLabels, when Kueue's case sets them
        extra["flavor_node_labels"] = _labels(case["flavorNodeLabels"], f"{where}: flavorNodeLabels")
    return Cluster.build(
        topology_name=case["topology"],
        levels=tuple(case["levels"]),
        nodes=nodes,
        flavor_tolerations=tolerations,
        **extra,
    )


def expected_outcome(want: Any, where: str) -> tuple[Any, ...]:
    """('fits', levels, domains) or ('fails', reason), in the same shape as `actual_outcome`."""
    if not isinstance(want, Mapping) or "fits" not in want:
        raise CaseFormatError(f"{where}: expected a mapping with 'fits'")
    if want["fits"]:
        w = _mapping(want, _WANT_FIT_KEYS, where)
        domains = tuple((tuple(d["values"]), d["count"]) for d in w["domains"])
        return ("fits", tuple(w["levels"]), domains)
    w = _mapping(want, _WANT_FAIL_KEYS, where)
    return ("fails", w["reason"])


def actual_outcome(placement: Placement) -> tuple[Any, ...]:
    if not placement.fits:
        return ("fails", placement.reason)
    if placement.assignment is None:
        return ("fits", None, None)
    domains = tuple((tuple(d.values), d.count) for d in placement.assignment.domains)
    return ("fits", tuple(placement.assignment.levels), domains)


def load_cases(directory: Path = CASES_DIR) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(data, list):
            raise CaseFormatError(f"{path.name}: expected a list of cases")
        for i, raw in enumerate(data):
            case = dict(_mapping(raw, _CASE_KEYS, f"{path.name}[{i}]"))
            missing = _CASE_REQUIRED - set(case)
            if missing:
                raise CaseFormatError(f"{path.name}[{i}]: missing keys {sorted(missing)}")
            case["_file"] = path.name
            cases.append(case)
    return cases


CASES = load_cases()


def test_cases_are_well_formed() -> None:
    """The data alone: it parses into scorer inputs and its expectations are self-consistent."""
    assert CASES, f"no cases found under {CASES_DIR}"
    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names)), "case names must be unique: they are the test ids"
    for case in CASES:
        where = f"{case['_file']}: {case['name']}"
        for i, n in enumerate(case["nodes"]):
            build_node(n, f"{where}: nodes[{i}]")
        built = [build_pod_set(p, f"{where}: podSets[{i}]") for i, p in enumerate(case["podSets"])]
        pod_sets = {p.name: p for p in built}
        assert len(pod_sets) == len(case["podSets"]), f"{where}: PodSet names must be unique"
        assert case["want"], f"{where}: nothing to check"
        for name, want in case["want"].items():
            assert name in pod_sets, f"{where}: want names unknown PodSet {name!r}"
            outcome = expected_outcome(want, f"{where}: want.{name}")
            if outcome[0] == "fits":
                assert sum(count for _, count in outcome[2]) == pod_sets[name].count, (
                    f"{where}: want.{name} assigns a different number of pods than the PodSet has"
                )


def _engine(name: str) -> scorer.Engine:
    available = scorer.engines()
    if name not in available:
        pytest.fail(
            f"scorer engine {name!r} is not available here (have: {sorted(available)}); build it first"
        )
    return available[name]


@pytest.mark.parametrize("engine_name", ENGINE_NAMES)
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_kueue_case(case: Mapping[str, Any], engine_name: str) -> None:
    engine = _engine(engine_name)
    where = f"{case['_file']}: {case['name']}"
    pod_sets: Sequence[PodSetRequest] = [
        build_pod_set(p, f"{where}: podSets[{i}]") for i, p in enumerate(case["podSets"])
    ]
    cluster = build_cluster(case)

    placements = cluster.now.place(pod_sets, engine=engine)

    assert [p.name for p in placements] == [p.name for p in pod_sets], "placements must follow input order"
    by_name = {p.name: p for p in placements}
    expected = {name: expected_outcome(w, f"{where}: want.{name}") for name, w in case["want"].items()}
    actual = {name: actual_outcome(by_name[name]) for name in case["want"]}
    assert actual == expected
