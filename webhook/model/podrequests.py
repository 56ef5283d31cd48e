"""Per-pod resource requests, computed the way the scheduler and Kueue compute them.

This is the project's one request calculator. It follows Kubernetes ``PodRequests``
(``k8s.io/component-helpers/resource/helpers.go``) for a pod that has not started yet:

* app containers add up; a resource with a limit but no request counts its limit, because the
  API server defaults such a request to the limit before anything schedules the pod;
* init containers run one at a time, so they contribute a maximum, not a sum; restartable init
  containers (``restartPolicy: Always``, KEP-753 sidecars) keep running, so each adds to the app
  sum and to every init container started after it;
* pod-level ``spec.resources`` (KEP-2837) replaces the container total for cpu, memory and
  hugepages; a pod-level limit stands in only where no container asked for that resource;
* ``spec.overhead`` is added last.

Kueue adjusts the pod spec before it counts (``workload.AdjustResources``), and so does the API
server's admission (LimitRanger, RuntimeClass) before a pod runs; ``PodDefaults`` carries what
those steps need: a RuntimeClass's ``overhead.podFixed`` for a pod that names it and states no
overhead, then the namespace's LimitRange ``defaultRequest``/``default`` for what a container
(or, where pod-level resources are set, the pod) leaves out, and finally limits stand in for
missing requests.

Amounts are summed exactly and rounded once at the end (``quantity.canonical``), as Kubernetes
rounds the summed Quantity. Resources that come out as zero are left out. The ``pods: 1`` entry
is the scorer's business, not this module's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import orjson

from webhook.model.quantity import canonical, parse_quantity
from webhook.wire.errors import FieldError, InvalidObject

Amounts = dict[str, Fraction]


@dataclass(frozen=True)
class PodDefaults:
    """What the namespace and cluster fill into a pod spec before Kueue counts it."""

    container_requests: Mapping[str, Fraction] = field(default_factory=dict)  # LimitRange defaultRequest
    container_limits: Mapping[str, Fraction] = field(default_factory=dict)  # LimitRange default
    pod_requests: Mapping[str, Fraction] = field(default_factory=dict)
    pod_limits: Mapping[str, Fraction] = field(default_factory=dict)
    overheads: Mapping[str, Mapping[str, Fraction]] = field(default_factory=dict)  # RuntimeClass name

    def __bool__(self) -> bool:
        return any(
            (
                self.container_requests,
                self.container_limits,
                self.pod_requests,
                self.pod_limits,
                self.overheads,
            )
        )


NO_DEFAULTS = PodDefaults()

_POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})


class _Reader:
    """Walks a pod spec, collecting every field error so the user sees them all at once."""

    def __init__(self, defaults: PodDefaults) -> None:
        self.errors: list[FieldError] = []
        self.defaults = defaults

    def mapping(self, parent: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
        value = parent.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.errors.append(FieldError(f"{path}.{key}", "must be an object"))
            return {}
        return value

    def containers(self, spec: Mapping[str, Any], key: str, path: str) -> list[tuple[str, Mapping[str, Any]]]:
        value = spec.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self.errors.append(FieldError(f"{path}.{key}", "must be a list of containers"))
            return []
        found: list[tuple[str, Mapping[str, Any]]] = []
        for i, item in enumerate(value):
            if isinstance(item, Mapping):
                found.append((f"{path}.{key}[{i}]", item))
            else:
                self.errors.append(FieldError(f"{path}.{key}[{i}]", "must be an object"))
        return found

    def amounts(self, resources: Mapping[str, Any], key: str, path: str) -> Amounts:
        """Parse ``requests`` or ``limits``; negative amounts are errors, as API validation says."""
        found: Amounts = {}
        for name, raw in self.mapping(resources, key, path).items():
            where = f"{path}.{key}.{name}"
            try:
                value = parse_quantity(raw, where)
            except InvalidObject as exc:
                self.errors.extend(exc.errors)
                continue
            if value < 0:
                self.errors.append(FieldError(where, f'"{raw}": must be greater than or equal to 0'))
                continue
            if is_extended(str(name)) and value.denominator != 1:
                self.errors.append(
                    FieldError(where, f'"{raw}": must be an integer')
                )  # as the API server says
                continue
            found[str(name)] = value
        return found

    def effective_requests(self, container: Mapping[str, Any], path: str) -> Amounts:
        """A container's requests: LimitRange ``defaultRequest`` for what it leaves out, then its
        limits (with LimitRange ``default`` filled in) for what is still missing."""
        resources = self.mapping(container, "resources", path)
        requests = self.amounts(resources, "requests", f"{path}.resources")
        limits = self.amounts(resources, "limits", f"{path}.resources")
        d = self.defaults
        return {**d.container_limits, **limits, **d.container_requests, **requests}


def is_extended(resource: str) -> bool:
    """Kubernetes' ``IsExtendedResourceName``: a qualified name outside the kubernetes.io domain
    (``nvidia.com/gpu``); the API server takes only whole numbers of these."""
    if "/" not in resource or resource.startswith(("requests.", "hugepages-")):
        return False
    domain = resource.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def pod_requests(
    pod_spec: Mapping[str, Any], path: str, defaults: PodDefaults = NO_DEFAULTS
) -> dict[str, int]:
    """Canonical per-pod requests (milli-CPU, whole units otherwise), zeros left out.

    ``path`` is the field path of ``pod_spec`` itself, e.g. ``spec.template.spec``; errors name
    the exact offending field under it. Raises ``InvalidObject`` with every error found.
    """
    reader = _Reader(defaults)
    total = _containers_total(reader, pod_spec, path)
    _apply_pod_level(reader, pod_spec, path, total)
    overhead = reader.amounts(pod_spec, "overhead", path)
    runtime_class = pod_spec.get("runtimeClassName")
    if not overhead and isinstance(runtime_class, str):
        overhead = dict(defaults.overheads.get(runtime_class, {}))
    _add(total, overhead)
    if reader.errors:
        raise InvalidObject(reader.errors)
    result = {name: canonical(name, value, path) for name, value in sorted(total.items())}
    return {name: amount for name, amount in result.items() if amount != 0}


def _containers_total(reader: _Reader, spec: Mapping[str, Any], path: str) -> Amounts:
    total: Amounts = {}
    for where, container in reader.containers(spec, "containers", path):
        _add(total, reader.effective_requests(container, where))
    sidecars: Amounts = {}
    init_peak: Amounts = {}
    for where, container in reader.containers(spec, "initContainers", path):
        requests = reader.effective_requests(container, where)
        if container.get("restartPolicy") == "Always":
            _add(total, requests)
            _add(sidecars, requests)
            _max(init_peak, sidecars)
        else:
            _max(init_peak, _summed(requests, sidecars))
    _max(total, init_peak)
    return total


def _apply_pod_level(reader: _Reader, spec: Mapping[str, Any], path: str, total: Amounts) -> None:
    """Pod-level requests override the container total for the resources KEP-2837 covers.

    A pod-level limit stands in only where no container asked for that resource: the API server
    defaults a missing pod-level request to the containers' sum first, so Kueue (which copies
    limits into requests still missing) sees that sum. The Pod-type LimitRange defaults apply
    only where pod-level resources are set at all.
    """
    raw = spec.get("resources")
    resources = reader.mapping(spec, "resources", path)
    requests = {**(reader.defaults.pod_requests if raw else {})}
    requests.update(reader.amounts(resources, "requests", f"{path}.resources"))
    limits = {**(reader.defaults.pod_limits if raw else {})}
    limits.update(reader.amounts(resources, "limits", f"{path}.resources"))
    for name, value in {**limits, **requests}.items():
        if not (name in _POD_LEVEL_RESOURCES or name.startswith("hugepages-")):
            continue
        if name not in requests and total.get(name, 0) > 0:
            continue  # only a limit was given, and the containers already ask for this resource
        total[name] = value


def _add(into: Amounts, other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        into[name] = into.get(name, Fraction(0)) + value


def _max(into: Amounts, other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        if value > into.get(name, Fraction(0)):
            into[name] = value


def _summed(a: Mapping[str, Fraction], b: Mapping[str, Fraction]) -> Amounts:
    out: Amounts = dict(a)
    _add(out, b)
    return out


_SHAPE_CACHE_SIZE = 4096
_by_shape: dict[bytes, dict[str, int]] = {}
_POD_FIELDS = ("resources", "overhead", "runtimeClassName")  # what pod_requests reads of a spec
_CONTAINER_FIELDS = ("containers", "initContainers")
_CONTAINER_KEYS = ("resources", "restartPolicy")  # and of each container


def stored_pod_requests(pod_spec: Mapping[str, Any], path: str) -> dict[str, int]:
    """`pod_requests` with no namespace defaults (a pod as the API server stores it, or a
    workload's template), remembered by the few fields it reads: a cluster's pods come in a few
    dozen shapes, a live watch sees every pod event, and a review reads its templates again.
    The cache is bounded; a shape it cannot key is computed, and so is every error (its message
    names ``path``)."""
    key = _shape(pod_spec)
    if key is None:
        return pod_requests(pod_spec, path)
    found = _by_shape.get(key)
    if found is None:
        found = pod_requests(pod_spec, path)
        if len(_by_shape) >= _SHAPE_CACHE_SIZE:
            _by_shape.clear()
        _by_shape[key] = found
    return dict(found)


def _shape(spec: Mapping[str, Any]) -> bytes | None:
    """What `pod_requests` reads of a spec, as JSON with sorted keys; None when it is not plain
    JSON data of the shapes `pod_requests` accepts (computed then, so that its errors are said).

    JSON keeps ``1``, ``1.0``, ``true`` and ``"1"`` apart, as quantities must be; a value JSON
    cannot say exactly (NaN or infinity, which orjson writes as ``null``; an int past 64 bits;
    a non-string key) and an explicit null are never remembered: such a spec is computed each
    time. One orjson call: a seventh of what freezing the same fields into tuples cost (0.6
    against 4.4 us), on every pod event of a live watch."""
    parts: dict[str, Any] = {name: spec[name] for name in _POD_FIELDS if name in spec}
    for name in _CONTAINER_FIELDS:
        containers = spec.get(name)
        if containers is None:
            continue
        if type(containers) is not list:
            return None
        rows = []
        for container in containers:
            if type(container) is not dict:
                return None
            rows.append({key: container[key] for key in _CONTAINER_KEYS if key in container})
        parts[name] = rows
    try:
        key = orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return None
    return None if b"null" in key else key
