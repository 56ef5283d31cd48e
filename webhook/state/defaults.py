"""LimitRanges and RuntimeClasses: what the API server and Kueue fill into pod specs.

Kueue's ``AdjustResources`` applies a RuntimeClass's ``overhead.podFixed`` and the namespace's
LimitRange defaults before it counts a workload (``limitrange.Summarize``: ``default`` and
``defaultRequest`` from the first LimitRange that sets a resource). Each LimitRange is read on
its own (`read_limit_range`), so a malformed one is left out alone, and the namespace's readable
ones are then summarised (`limit_range_defaults`) into the ``PodDefaults`` the one request
calculator takes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from webhook.model.podrequests import PodDefaults
from webhook.model.quantity import parse_quantity
from webhook.state.fields import metadata, object_list
from webhook.wire.errors import InvalidObject

LIMIT_KINDS = ("Container", "Pod")
KEYS = ("default", "defaultRequest")


@dataclass(frozen=True)
class LimitRange:
    """One LimitRange's defaults: (limit type, key) -> resource -> amount, first item wins."""

    name: str
    defaults: Mapping[tuple[str, str], Mapping[str, Fraction]]


def read_limit_range(obj: Mapping[str, Any]) -> LimitRange:
    """The defaults one LimitRange sets; InvalidObject naming it when they do not read."""
    meta = metadata(obj)
    where = f"LimitRange {meta.get('namespace', '')}/{meta.get('name', '')}: spec.limits"
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise InvalidObject.at(where, "spec must be an object")
    found: dict[tuple[str, str], dict[str, Fraction]] = {}
    for i, item in enumerate(object_list(spec.get("limits"), where)):
        kind = str(item.get("type", ""))
        for key in KEYS:
            if kind in LIMIT_KINDS:
                amounts = _amounts(item.get(key), f"{where}[{i}].{key}")
                into = found.setdefault((kind, key), {})
                for resource, amount in amounts.items():
                    into.setdefault(resource, amount)
    return LimitRange(str(meta.get("name", "")), found)


def limit_range_defaults(limit_ranges: Iterable[LimitRange]) -> PodDefaults:
    """The summary of one namespace's LimitRanges, in name order; the first to set a key wins."""
    found: dict[tuple[str, str], dict[str, Fraction]] = {
        (kind, key): {} for kind in LIMIT_KINDS for key in KEYS
    }
    for limit_range in sorted(limit_ranges, key=lambda lr: lr.name):
        for which, amounts in limit_range.defaults.items():
            for resource, amount in amounts.items():
                found[which].setdefault(resource, amount)
    return PodDefaults(
        container_requests=found[("Container", "defaultRequest")],
        container_limits=found[("Container", "default")],
        pod_requests=found[("Pod", "defaultRequest")],
        pod_limits=found[("Pod", "default")],
    )


def runtime_overhead(obj: Mapping[str, Any]) -> Mapping[str, Fraction]:
    """A RuntimeClass's ``overhead.podFixed``."""
    where = f"RuntimeClass {metadata(obj).get('name', '')}: overhead.podFixed"
    overhead = obj.get("overhead") or {}
    fixed = overhead.get("podFixed") if isinstance(overhead, Mapping) else None
    return _amounts(fixed, where)


def _amounts(raw: object, where: str) -> dict[str, Fraction]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InvalidObject.at(where, "must be a map of quantities")
    return {str(r): parse_quantity(v, f"{where}[{r}]") for r, v in raw.items()}
