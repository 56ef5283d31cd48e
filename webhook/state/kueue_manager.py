"""Kueue's controller Deployment and its Configuration ConfigMap, read as Kueue reads them.

Kueue v0.19.2's release manifests (``config/default/kustomization.yaml``) and Helm chart
(``charts/kueue/templates/_helpers.tpl``) label both objects ``app.kubernetes.io/name: kueue``
and ``control-plane: controller-manager``; the controller's container is ``manager`` (its image
tag is the release), and ``--config`` names the file the ``manager-config`` ConfigMap volume
mounts (key ``controller_manager_config.yaml``). Other objects with those labels (KueueViz,
whose Deployments carry no ``control-plane`` label and no ``manager`` container) are not read.

Gates are parsed as Kubernetes' ``featuregate.Set`` parses ``--feature-gates`` (``A=true,B=0``,
Go's ``strconv.ParseBool``), flags as Go's ``flag`` package does (``-x`` or ``--x``, ``=v`` or the
next argument, the last one wins), and the Configuration as its strict decoder would accept it
(``config.kueue.x-k8s.io/v1beta1`` or ``v1beta2``, ``featureGates`` a map of names to booleans).
A shape Kueue could not start with raises InvalidObject: the object is left out alone
(`state.rejected`) and the gates it holds read unknown.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from webhook.state.fields import metadata, object_list
from webhook.wire.errors import InvalidObject

NAME_LABEL, NAME = "app.kubernetes.io/name", "kueue"
SELECTOR = f"{NAME_LABEL}={NAME}"  # what live mode lists Deployments and ConfigMaps by
CONTROL_PLANE_LABEL, CONTROL_PLANE = "control-plane", "controller-manager"
VERSION_LABEL = "app.kubernetes.io/version"  # the Helm chart's appVersion (``v0.19.2``)
MANAGER = "manager"
CONFIG_KEY = "controller_manager_config.yaml"
CONFIG_APIS = frozenset({"config.kueue.x-k8s.io/v1beta1", "config.kueue.x-k8s.io/v1beta2"})
BOOL_FLAGS = frozenset({"zap-devel"})  # the manager's flags that take no separate value
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


@dataclass(frozen=True, slots=True)
class Controller:
    """What Kueue's controller Deployment says of the release and where its gates come from."""

    namespace: str
    name: str
    image_tag: str  # "" for an image pinned by digest alone
    version_label: str  # the Deployment's app.kubernetes.io/version, "" when absent
    flag_gates: Mapping[str, bool] | None  # --feature-gates; None when not given
    config_file: str | None  # --config; None: Kueue's default Configuration
    config_map: tuple[str, str] | None  # (ConfigMap, key) that file is mounted from

    @property
    def qualified_name(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ConfigGates:
    """The ``featureGates`` of one Kueue Configuration ConfigMap (None: not set)."""

    key: str
    gates: Mapping[str, bool] | None


def is_controller(obj: Mapping[str, Any]) -> bool:
    """A Deployment labelled as Kueue's controller, with the ``manager`` container."""
    labels = _labels(obj)
    if labels.get(NAME_LABEL) != NAME or labels.get(CONTROL_PLANE_LABEL) != CONTROL_PLANE:
        return False
    containers = _dig(obj, "spec", "template", "spec").get("containers")
    return isinstance(containers, list) and any(
        isinstance(c, Mapping) and c.get("name") == MANAGER for c in containers
    )


def is_config(obj: Mapping[str, Any]) -> bool:
    """A ConfigMap labelled as Kueue's, holding a controller manager configuration."""
    data = obj.get("data")
    return _labels(obj).get(NAME_LABEL) == NAME and isinstance(data, Mapping) and CONFIG_KEY in data


def read_controller(obj: Mapping[str, Any]) -> Controller:
    """The release and gate sources of Kueue's controller Deployment (`is_controller`)."""
    meta = metadata(obj)
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    where = f"Deployment {namespace}/{name}: spec.template.spec"
    pod = _dig(obj, "spec", "template", "spec")
    containers = object_list(pod.get("containers"), f"{where}.containers")
    index = next((i for i, c in enumerate(containers) if c.get("name") == MANAGER), None)
    if index is None:
        raise InvalidObject.at(f"{where}.containers", f"has no container {MANAGER!r}")
    manager, at = containers[index], f"{where}.containers[{index}]"
    image = manager.get("image")
    if not isinstance(image, str):
        raise InvalidObject.at(f"{at}.image", "must be a string")
    command = _strings(manager.get("command"), f"{at}.command")
    flags = go_flags([*command[1:], *_strings(manager.get("args"), f"{at}.args")])
    gates = feature_gates(flags["feature-gates"], f"{at}.args") if flags.get("feature-gates") else None
    config_file = flags.get("config") or None
    mounts = object_list(manager.get("volumeMounts"), f"{at}.volumeMounts")
    volumes = object_list(pod.get("volumes"), f"{where}.volumes")
    source = _config_map(config_file, mounts, volumes) if config_file else None
    label = str(_labels(obj).get(VERSION_LABEL) or "")
    return Controller(namespace, name, image_tag(image), label, gates, config_file, source)


def read_config(obj: Mapping[str, Any]) -> ConfigGates:
    """The ``featureGates`` of Kueue's Configuration ConfigMap (`is_config`)."""
    meta = metadata(obj)
    path = f"ConfigMap {meta.get('namespace') or ''}/{meta.get('name') or ''}: data[{CONFIG_KEY}]"
    text = obj["data"][CONFIG_KEY]
    if not isinstance(text, str):
        raise InvalidObject.at(path, "must be a string")
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        raise InvalidObject.at(path, f"not YAML: {getattr(exc, 'problem', None) or exc}{line}") from None
    if not isinstance(config, Mapping):
        raise InvalidObject.at(path, "must be a Kueue Configuration object")
    if config.get("apiVersion") not in CONFIG_APIS or config.get("kind") != "Configuration":
        raise InvalidObject.at(path, f"must be a Configuration of {' or '.join(sorted(CONFIG_APIS))}")
    raw = config.get("featureGates")
    if raw is None:
        return ConfigGates(CONFIG_KEY, None)
    if not isinstance(raw, Mapping) or not all(
        isinstance(k, str) and isinstance(v, bool) for k, v in raw.items()
    ):
        raise InvalidObject.at(f"{path}.featureGates", "must be a map of feature names to booleans")
    return ConfigGates(CONFIG_KEY, dict(raw))


def go_flags(tokens: Sequence[str]) -> dict[str, str]:
    """Flags as Go's ``flag`` package parses them, up to the first argument that is not one."""
    found: dict[str, str] = {}
    rest = list(tokens)
    while rest and rest[0].startswith("-") and rest[0] not in ("-", "--"):
        flag = rest.pop(0).lstrip("-")
        name, sep, value = flag.partition("=")
        if not sep and name not in BOOL_FLAGS and rest:
            value = rest.pop(0)
        found[name] = value
    return found


def feature_gates(value: str, path: str) -> dict[str, bool]:
    """``featuregate.Set``: ``A=true,B=false`` (spaces trimmed, empty items skipped)."""
    gates: dict[str, bool] = {}
    for item in filter(None, value.split(",")):
        name, sep, raw = item.partition("=")
        flag = raw.strip()
        if not sep or flag not in _TRUE | _FALSE:
            raise InvalidObject.at(path, f"--feature-gates: {item!r} is not name=bool (Kueue does not start)")
        gates[name.strip()] = flag in _TRUE
    return gates


def image_tag(image: str) -> str:
    """The tag of an image reference (``registry:5000/kueue/kueue:v0.19.2@sha256:…``), or ""."""
    name = image.split("@", 1)[0]
    repository, sep, tag = name.rpartition(":")
    return tag if sep and "/" not in tag and repository else ""


def slim(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """What the readers read of a Deployment or ConfigMap, for the live mirror to keep: a
    Deployment's status and the rest of its spec change without changing the release."""
    meta = obj.get("metadata")
    keys = ("name", "namespace", "labels")
    kept_meta = {k: meta.get(k) for k in keys} if isinstance(meta, Mapping) else meta
    head = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": kept_meta}
    if obj.get("kind") == "ConfigMap":
        return {**head, "data": obj.get("data")}
    pod = _dig(obj, "spec", "template", "spec")
    containers = pod.get("containers")
    if isinstance(containers, list):
        fields = ("name", "image", "command", "args", "volumeMounts")
        containers = [{k: c.get(k) for k in fields} if isinstance(c, Mapping) else c for c in containers]
    template = {"spec": {"containers": containers, "volumes": pod.get("volumes")}}
    return {**head, "spec": {"template": template}}


def _config_map(
    path: str, mounts: Sequence[Mapping[str, Any]], volumes: Sequence[Mapping[str, Any]]
) -> tuple[str, str] | None:
    """(ConfigMap, key) the file at ``path`` is mounted from; None when it is not from one."""
    maps = {v.get("name"): v.get("configMap") for v in volumes if isinstance(v.get("configMap"), Mapping)}
    for mount in sorted(mounts, key=lambda m: -len(str(m.get("mountPath") or ""))):
        at, sub = str(mount.get("mountPath") or ""), str(mount.get("subPath") or "")
        if path == at:
            relative = sub
        elif at and path.startswith(at.rstrip("/") + "/"):
            relative = posixpath.join(sub, path[len(at.rstrip("/")) + 1 :])
        else:
            continue
        source = maps.get(mount.get("name"))
        if source is None or not relative:
            return None
        items = {i.get("path"): i.get("key") for i in source.get("items") or () if isinstance(i, Mapping)}
        key = items.get(relative) if items else relative
        return (str(source.get("name") or ""), str(key)) if key else None
    return None


def _strings(raw: object, path: str) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise InvalidObject.at(path, "must be a list of strings")
    return raw


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def _dig(obj: Mapping[str, Any], *keys: str) -> Mapping[str, Any]:
    """``obj[k1][k2]…``, {} where a step is missing or not an object."""
    found: Any = obj
    for key in keys:
        found = found.get(key) if isinstance(found, Mapping) else None
    return found if isinstance(found, Mapping) else {}
