"""Reading an AdmissionPolicy document: every field checked, each error naming its path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from webhook.decide.policy import (
    API_VERSION,
    BACKENDS,
    DEFAULT_GANG_SHAPES,
    DEFAULT_GPU_RESOURCES,
    KIND,
    KUEUE_USERS,
    MAX_GANG_SHAPES,
    MODES,
    PARTIAL_START_AFTER,
    TIGHTEST,
    DefaultTopology,
    Gang,
    GangShape,
    Inject,
    LabelSelector,
    Match,
    Policy,
    PolicyError,
    Rule,
)
from webhook.wire.durations import parse_duration


def parse_policy(text: str, source: str) -> Policy:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PolicyError(f"{source}: not valid YAML: {exc}") from None
    doc = _map(doc, source)
    if doc.get("apiVersion") != API_VERSION or doc.get("kind") != KIND:
        raise PolicyError(f"{source}: expected apiVersion {API_VERSION} and kind {KIND}")
    spec = _map(doc.get("spec", {}), f"{source}: spec")
    _only(
        spec,
        (
            "exemptNamespaces",
            "defaultTopology",
            "gpuResources",
            "kueueUsers",
            "partialStartAfter",
            "gangShapes",
            "rules",
        ),
        f"{source}: spec",
    )
    rules = [
        _rule(r, f"{source}: spec.rules[{i}]")
        for i, r in enumerate(_seq(spec.get("rules", []), f"{source}: spec.rules"))
    ]
    default = spec.get("defaultTopology")
    return Policy(
        name=str(_map(doc.get("metadata", {}), f"{source}: metadata").get("name", source)),
        rules=tuple(rules),
        exempt_namespaces=_strs(spec.get("exemptNamespaces", []), f"{source}: spec.exemptNamespaces"),
        default_topology=_default_topology(default, f"{source}: spec.defaultTopology") if default else None,
        gpu_resources=_strs(
            spec.get("gpuResources", list(DEFAULT_GPU_RESOURCES)), f"{source}: spec.gpuResources"
        ),
        kueue_users=_strs(spec.get("kueueUsers", list(KUEUE_USERS)), f"{source}: spec.kueueUsers"),
        partial_start_after=_duration(spec, "partialStartAfter", PARTIAL_START_AFTER, f"{source}: spec"),
        gang_shapes=_gang_shapes(spec.get("gangShapes"), f"{source}: spec.gangShapes"),
    )


def _duration(spec: Mapping[str, Any], name: str, default: float, where: str) -> float:
    if name not in spec:
        return default
    try:
        return parse_duration(spec[name])
    except ValueError as exc:
        raise PolicyError(f"{where}.{name}: {exc}") from None


def _gang_shapes(raw: object, where: str) -> tuple[GangShape, ...]:
    if raw is None:
        return DEFAULT_GANG_SHAPES
    shapes = []
    for i, item in enumerate(_seq(raw, where)):
        m = _map(item, f"{where}[{i}]")
        _only(m, ("pods", "gpusPerPod"), f"{where}[{i}]")
        pods, gpus = (_positive(m.get(k), f"{where}[{i}].{k}") for k in ("pods", "gpusPerPod"))
        shapes.append(GangShape(pods, gpus))
    if len(shapes) > MAX_GANG_SHAPES or len(set(shapes)) != len(shapes):
        raise PolicyError(f"{where}: at most {MAX_GANG_SHAPES} shapes, each named once")
    return tuple(shapes)


def _rule(raw: object, where: str) -> Rule:
    spec = _map(raw, where)
    _only(spec, ("name", "match", "inject", "gang"), where)
    return Rule(
        name=str(spec.get("name", where)),
        match=_match(spec.get("match", {}), f"{where}.match"),
        inject=_inject(spec.get("inject", {}), f"{where}.inject"),
        gang=_gang(spec.get("gang", {}), f"{where}.gang"),
    )


def _match(raw: object, where: str) -> Match:
    m = _map(raw, where)
    keys = (
        "namespaces",
        "namespaceSelector",
        "queues",
        "minPods",
        "maxPods",
        "minGPUs",
        "maxGPUs",
        "minGPUsPerPod",
    )
    _only(m, keys, where)
    selector = m.get("namespaceSelector")
    return Match(
        namespaces=_strs(m.get("namespaces", []), f"{where}.namespaces"),
        namespace_selector=_selector(selector, f"{where}.namespaceSelector")
        if selector is not None
        else None,
        queues=_strs(m.get("queues", []), f"{where}.queues"),
        min_pods=_int(m.get("minPods", 0), f"{where}.minPods"),
        max_pods=_int(m["maxPods"], f"{where}.maxPods") if "maxPods" in m else None,
        min_gpus=_int(m.get("minGPUs", 0), f"{where}.minGPUs"),
        max_gpus=_int(m["maxGPUs"], f"{where}.maxGPUs") if "maxGPUs" in m else None,
        min_gpus_per_pod=_int(m.get("minGPUsPerPod", 0), f"{where}.minGPUsPerPod"),
    )


def _inject(raw: object, where: str) -> Inject:
    m = _map(raw, where)
    _only(m, ("mode", "level", "loosestLevel", "groupLeaderWorkers"), where)
    mode = str(m.get("mode", "none"))
    if mode not in MODES:
        raise PolicyError(f"{where}.mode: must be one of {', '.join(MODES)}, got {mode!r}")
    loosest = m.get("loosestLevel")
    return Inject(
        mode=mode,
        level=str(m.get("level", TIGHTEST)),
        loosest_level=str(loosest) if loosest is not None else None,
        group_leader_workers=_bool(m.get("groupLeaderWorkers", False), f"{where}.groupLeaderWorkers"),
    )


def _gang(raw: object, where: str) -> Gang:
    m = _map(raw, where)
    _only(m, ("backend", "scheduleTimeoutSeconds"), where)
    backend = str(m.get("backend", "none"))
    if backend not in BACKENDS:
        raise PolicyError(f"{where}.backend: must be one of {', '.join(BACKENDS)}, got {backend!r}")
    timeout = m.get("scheduleTimeoutSeconds")
    return Gang(backend, _int(timeout, f"{where}.scheduleTimeoutSeconds") if timeout is not None else None)


def _default_topology(raw: object, where: str) -> DefaultTopology:
    m = _map(raw, where)
    _only(m, ("name", "levels"), where)
    levels = _strs(m.get("levels", []), f"{where}.levels")
    if not m.get("name") and not levels:
        raise PolicyError(f"{where}: give a Topology name or its levels")
    return DefaultTopology(str(m.get("name", "")), levels)


def _selector(raw: object, where: str) -> LabelSelector:
    m = _map(raw, where)
    _only(m, ("matchLabels", "matchExpressions"), where)
    labels = {str(k): str(v) for k, v in _map(m.get("matchLabels", {}), f"{where}.matchLabels").items()}
    exprs = []
    for i, raw_expr in enumerate(_seq(m.get("matchExpressions", []), f"{where}.matchExpressions")):
        e = _map(raw_expr, f"{where}.matchExpressions[{i}]")
        op = str(e.get("operator"))
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise PolicyError(f"{where}.matchExpressions[{i}].operator: unsupported operator {op!r}")
        exprs.append(
            (str(e.get("key")), op, _strs(e.get("values", []), f"{where}.matchExpressions[{i}].values"))
        )
    return LabelSelector(labels, tuple(exprs))


def _map(raw: object, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise PolicyError(f"{where}: must be a mapping")
    return raw


def _seq(raw: object, where: str) -> Sequence[Any]:
    if not isinstance(raw, list):
        raise PolicyError(f"{where}: must be a list")
    return raw


def _strs(raw: object, where: str) -> tuple[str, ...]:
    return tuple(str(x) for x in _seq(raw, where))


def _int(raw: object, where: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise PolicyError(f"{where}: must be a non-negative integer, got {raw!r}")
    return raw


def _positive(raw: object, where: str) -> int:
    value = _int(raw, where)
    if value == 0:
        raise PolicyError(f"{where}: must be at least 1, got 0")
    return value


def _bool(raw: object, where: str) -> bool:
    if not isinstance(raw, bool):
        raise PolicyError(f"{where}: must be true or false, got {raw!r}")
    return raw


def _only(m: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
    unknown = sorted(set(m) - set(allowed))
    if unknown:
        raise PolicyError(f"{where}: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")
