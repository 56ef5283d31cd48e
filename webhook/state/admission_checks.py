"""Kueue's admission checks as they change where a gang is placed: AdmissionCheck,
ProvisioningRequestConfig, and a ClusterQueue's ``admissionChecksStrategy``.

Kueue v0.19.2 assigns a TAS flavor's topology at quota reservation, on the nodes of the cluster,
except in two cases (``podSetTopologyRequest`` in ``flavorassigner/tas_flavorassigner.go``):

- the ClusterQueue has a MultiKueue check (``HasMultiKueueAdmissionCheck``): the topology is
  always assigned on the worker cluster the Workload is dispatched to, never on this one;
- the flavor is behind a ProvisioningRequest check (``HasProvRequestAdmissionCheck``: the checks
  of controller ``kueue.x-k8s.io/provisioning-request``, on every flavor or on their
  ``onFlavors``): the first pass reserves quota with no topology, Kueue asks the autoscaler for
  capacity, and places the gang once the nodes are provisioned.

Either way today's nodes do not decide whether the gang ever runs (`Delay`). A check named by
the queue but absent makes Kueue's ClusterQueue inactive until it exists; its controller is then
unknown, so it delays too: tasgate never denies on nodes the check may change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.state.fields import object_list
from webhook.wire.errors import InvalidObject

PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
KINDS = frozenset({"AdmissionCheck", "ProvisioningRequestConfig", "MultiKueueConfig"})


@dataclass(frozen=True)
class AdmissionCheck:
    name: str
    controller: str
    active: bool
    config: str | None = None  # the ProvisioningRequestConfig its parameters name, if any
    multikueue_config: str | None = None  # the MultiKueueConfig its parameters name, if any


@dataclass(frozen=True)
class ProvisioningConfig:
    name: str
    class_name: str
    managed: tuple[str, ...] = ()  # managedResources (empty: every resource)


@dataclass(frozen=True)
class CheckRule:
    """One entry of ``admissionChecksStrategy.admissionChecks``: a check and the flavors it
    applies to (empty: every flavor of the queue)."""

    name: str
    on_flavors: tuple[str, ...] = ()

    def applies_to(self, flavor: str) -> bool:
        return not self.on_flavors or flavor in self.on_flavors


@dataclass(frozen=True)
class Delay:
    """Why Kueue does not place a flavor's topology on today's nodes: ``kind`` is
    ``provisioning`` (capacity is provisioned first), ``multikueue`` (placed on a worker
    cluster) or ``missing`` (a check that does not exist yet: the queue admits nothing)."""

    kind: str
    check: str
    config: ProvisioningConfig | None = None
    # MultiKueue: the worker clusters (MultiKueueCluster names) its MultiKueueConfig lists; None
    # when that config is not known (every worker tasgate was given may be one).
    workers: tuple[str, ...] | None = None

    def describe(self, queue: str) -> str:
        """One sentence naming the check, for a verdict's warning (numbers come in their own)."""
        if self.kind == "multikueue":
            return (
                f'ClusterQueue "{queue}" is MultiKueue (check "{self.check}"): '
                "the topology is placed on the worker cluster that admits it"
            )
        if self.kind == "missing":
            return (
                f'ClusterQueue "{queue}" names admission check "{self.check}", which does not exist: '
                "Kueue admits nothing from it until it does"
            )
        config = f', ProvisioningRequestConfig "{self.config.name}"' if self.config else ""
        return (
            f'ClusterQueue "{queue}" provisions capacity first (check "{self.check}"{config}): '
            "Kueue places the gang on the nodes it gets"
        )


@dataclass
class CheckObjects:
    """The admission check objects of one cluster, by name (all cluster-scoped)."""

    checks: dict[str, AdmissionCheck]
    configs: dict[str, ProvisioningConfig]
    multikueue: dict[str, tuple[str, ...]]  # MultiKueueConfig -> its clusters


def add_check_object(obj: Mapping[str, Any], kind: str, name: str, into: CheckObjects) -> None:
    """Fold an AdmissionCheck, a ProvisioningRequestConfig or a MultiKueueConfig in."""
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise InvalidObject.at(f"{kind} {name}: spec", "must be an object")
    if kind == "AdmissionCheck":
        into.checks[name] = _admission_check(obj, name, spec)
    elif kind == "MultiKueueConfig":
        clusters = spec.get("clusters") or []
        if not isinstance(clusters, list):
            raise InvalidObject.at(f"MultiKueueConfig {name}: spec.clusters", "must be a list of names")
        into.multikueue[name] = tuple(str(c) for c in clusters)
    else:
        managed = spec.get("managedResources") or []
        into.configs[name] = ProvisioningConfig(
            name,
            str(spec.get("provisioningClassName") or ""),
            tuple(str(r) for r in managed) if isinstance(managed, list) else (),
        )


def _admission_check(obj: Mapping[str, Any], name: str, spec: Mapping[str, Any]) -> AdmissionCheck:
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    active = any(
        isinstance(c, Mapping) and c.get("type") == "Active" and c.get("status") == "True"
        for c in (conditions if isinstance(conditions, list) else [])
    )
    params = spec.get("parameters")
    kind = params.get("kind") if isinstance(params, Mapping) else None
    named = str(params.get("name") or "") or None if isinstance(params, Mapping) else None
    controller = str(spec.get("controllerName") or "")
    if kind == "MultiKueueConfig":
        return AdmissionCheck(name, controller, active, multikueue_config=named)
    return AdmissionCheck(name, controller, active, named if kind == "ProvisioningRequestConfig" else None)


def parse_check_rules(name: str, spec: Mapping[str, Any]) -> tuple[CheckRule, ...]:
    """A ClusterQueue's checks as Kueue's ``NewAdmissionChecks`` reads them: the strategy's rules
    (v1beta2), or v1beta1's plain ``admissionChecks`` list (every flavor)."""
    strategy = spec.get("admissionChecksStrategy")
    if isinstance(strategy, Mapping):
        where = f"ClusterQueue {name}: spec.admissionChecksStrategy.admissionChecks"
        rules = object_list(strategy.get("admissionChecks"), where)
        return tuple(_rule(rule, f"{where}[{i}]") for i, rule in enumerate(rules))
    plain = spec.get("admissionChecks")
    if isinstance(plain, list):
        return tuple(CheckRule(str(check)) for check in plain)
    return ()


def _rule(rule: Mapping[str, Any], where: str) -> CheckRule:
    flavors = rule.get("onFlavors") or []
    if not isinstance(flavors, list):
        raise InvalidObject.at(f"{where}.onFlavors", "must be a list of flavor names")
    return CheckRule(str(rule.get("name", "")), tuple(str(f) for f in flavors))


def delay_for(
    rules: tuple[CheckRule, ...],
    flavor: str,
    checks: Mapping[str, AdmissionCheck],
    configs: Mapping[str, ProvisioningConfig],
    multikueue: Mapping[str, tuple[str, ...]],
) -> Delay | None:
    """Whether Kueue delays the topology of ``flavor`` in a queue with these check ``rules``.

    MultiKueue applies to the whole queue (Kueue refuses it per flavor); ProvisioningRequest and a
    check not yet created, to the flavors their rule names.
    """
    for rule in rules:
        check = checks.get(rule.name)
        if check is not None and check.controller == MULTIKUEUE_CONTROLLER:
            workers = multikueue.get(check.multikueue_config or "")
            return Delay("multikueue", rule.name, workers=workers)
    for rule in rules:
        if not rule.applies_to(flavor):
            continue
        check = checks.get(rule.name)
        if check is None:
            return Delay("missing", rule.name)
        if check.controller == PROVISIONING_CONTROLLER:
            config = configs.get(check.config) if check.config else None
            return Delay("provisioning", rule.name, config)
    return None
