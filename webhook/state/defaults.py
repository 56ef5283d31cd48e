"""LimitRanges and RuntimeClasses: what the API server and Kueue fill into pod specs.

Kueue's ``AdjustResources`` applies a RuntimeClass's ``overhead.podFixed`` and the namespace's
LimitRange defaults before it counts a workload (``limitrange.Summarize``: ``default`` and
``defaultRequest`` from the first LimitRange that sets a resource). They are read here into the
``PodDefaults`` the one request calculator takes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from webhook.model.podrequests import PodDefaults
from webhook.model.quantity import parse_quantity
from webhook.state.fields import metadata, object_list
from webhook.wire.errors import InvalidObject

LIMIT_KINDS = ("Container", "Pod")


def limit_range_defaults(limit_ranges: Iterable[Mapping[str, Any]]) -> PodDefaults:
    """The summary of one namespace's LimitRanges, in name order; the first to set a key wins."""
    found: dict[tuple[str, str], dict[str, Fraction]] = {
        (kind, key): {} for kind in LIMIT_KINDS for key in ("default", "defaultRequest")
    }
    for obj in sorted(limit_ranges, key=lambda o: str(metadata(o).get("name", ""))):
        where = (
            f"LimitRange {metadata(obj).get('namespace', '')}/{metadata(obj).get('name', '')}: spec.limits"
        )
        spec = obj.get("spec") or {}
        if not isinstance(spec, Mapping):
            raise InvalidObject.at(f"{where}", "spec must be an object")
        for i, item in enumerate(object_list(spec.get("limits"), where)):
            kind = str(item.get("type", ""))
            for key in ("default", "defaultRequest"):
                if kind in LIMIT_KINDS:
                    for resource, amount in _amounts(item.get(key), f"{where}[{i}].{key}").items():
                        found[(kind, key)].setdefault(resource, amount)
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
