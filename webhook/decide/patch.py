"""The one JSON Patch (RFC 6902) builder: add missing map entries, never overwrite.

Every mutation tasgate makes is "this key must exist in that map": a label or an annotation on
a template's metadata, or (the native backend) ``schedulingGroup`` on a template's pod spec.
Entries already present are left alone, so running the decision on its own output yields
no patch (mutating webhooks may be reinvoked). One key is ever removed (``Removal``): Kueue's
``pod-index-offset``, which its webhook writes only while no group name is set and which a
group name tasgate adds would otherwise count twice (`decide.kueue.inject`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Path = tuple[str | int, ...]
Value = str | Mapping[str, str]
_KEY_HOLDERS = frozenset({"metadata", "labels", "annotations"})


@dataclass(frozen=True)
class Entry:
    """``value`` must exist under ``key`` in the map at ``map_path`` (created if missing)."""

    map_path: Path
    key: str
    value: str


@dataclass(frozen=True)
class MapEntry:
    """As ``Entry``, for a map value (``schedulingGroup: {podGroupName}`` on a pod spec): added
    whole when ``key`` is missing, never merged into one that exists."""

    map_path: Path
    key: str
    value: Mapping[str, str]


@dataclass(frozen=True)
class Removal:
    """``key`` must not exist in the map at ``map_path`` (removed when it does)."""

    map_path: Path
    key: str


def escape(token: str | int) -> str:
    """RFC 6901: '~' becomes '~0' and '/' becomes '~1' (in that order)."""
    return str(token).replace("~", "~0").replace("/", "~1")


def pointer(path: Iterable[str | int]) -> str:
    return "".join("/" + escape(p) for p in path)


def build_patch(
    obj: Mapping[str, Any], entries: Iterable[Entry | MapEntry | Removal]
) -> list[dict[str, Any]]:
    """The smallest patch that makes every entry true of ``obj``: adds, and the removals of keys
    present (first, so an add below never lands in a map a removal then changes)."""
    wanted: dict[Path, dict[str, Value]] = {}
    ops: list[dict[str, Any]] = []
    for e in entries:
        if isinstance(e, Removal):
            held = _child(_node_at(obj, e.map_path), e.key)
            if held is not None:
                ops.append({"op": "remove", "path": pointer((*e.map_path, e.key))})
        else:
            wanted.setdefault(e.map_path, {}).setdefault(e.key, e.value)
    doc: Any = obj
    for map_path, values in wanted.items():
        for where, raw in _adds_for_map(doc, map_path, values):
            value = _plain(raw)
            ops.append({"op": "add", "path": pointer(where), "value": value})
            if isinstance(value, dict):
                # A map this patch creates must be seen by later entries below it (labels and
                # annotations of one missing `metadata`), or a second "add" would replace it.
                doc = _with_added(doc, where, value)
    return ops


def _plain(value: Any) -> Any:
    """A JSON-ready copy: maps as dicts (the patch is serialised, and may be applied again)."""
    return {k: _plain(v) for k, v in value.items()} if isinstance(value, Mapping) else value


def _adds_for_map(obj: Any, map_path: Path, values: Mapping[str, Value]) -> list[tuple[Path, Any]]:
    node: Any = obj
    for depth, part in enumerate(map_path):
        child = _child(node, part)
        if child is None:
            # Create the missing part with everything below it in one "add".
            value: Any = dict(values)
            for name in reversed(map_path[depth + 1 :]):
                value = {name: value}
            return [(map_path[: depth + 1], value)]
        node = child
    if not isinstance(node, Mapping):
        return []
    return [((*map_path, key), value) for key, value in values.items() if key not in node]


def _with_added(node: Any, path: Path, value: Any) -> Any:
    """``node`` with ``value`` set at ``path``, copying only the containers along the way."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(head, int) and isinstance(node, list):
        items = list(node)
        items[head] = _with_added(items[head], rest, value)
        return items
    copied = dict(node) if isinstance(node, Mapping) else {}
    copied[head] = _with_added(copied.get(head), rest, value)
    return copied


def _node_at(obj: Any, path: Path) -> Any:
    node = obj
    for part in path:
        node = _child(node, part)
    return node


def _child(node: Any, part: str | int) -> Any:
    if isinstance(part, int):
        return node[part] if isinstance(node, list) and 0 <= part < len(node) else None
    if isinstance(node, Mapping):
        return node.get(part)
    return None


def added_keys(op: Mapping[str, Any]) -> list[str]:
    """The keys an "add" op writes: a label's or annotation's, however deep the map it creates,
    else the field it adds (``schedulingGroup``, ``schedulingConstraints``); none for a removal."""
    if op.get("op") != "add":
        return []
    tokens = [_unescape(t) for t in str(op["path"]).split("/")[1:]]
    value = op.get("value")
    while isinstance(value, Mapping) and len(value) == 1 and isinstance(next(iter(value.values())), Mapping):
        tokens.append(str(next(iter(value))))
        value = next(iter(value.values()))
    if isinstance(value, Mapping) and tokens and tokens[-1] in _KEY_HOLDERS:
        return [str(k) for k in value]
    return tokens[-1:]


def apply_entries(obj: Mapping[str, Any], ops: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``obj`` with the ops of ``build_patch`` applied: what the API server would store."""
    out: dict[str, Any] = copy.deepcopy(dict(obj))
    for op in ops:
        if op.get("op") not in ("add", "remove"):
            raise ValueError(f"not an add or remove op: {op!r}")
        *parents, last = [_unescape(t) for t in str(op["path"]).split("/")[1:]]
        node: Any = out
        for token in parents:
            node = node[int(token)] if isinstance(node, list) else node[token]
        if op["op"] == "remove":
            del node[int(last) if isinstance(node, list) else last]
        elif isinstance(node, list):
            node.insert(int(last), copy.deepcopy(op["value"]))
        else:
            node[last] = copy.deepcopy(op["value"])
    return out


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")
