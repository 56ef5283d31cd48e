"""Careful readers of plain Kubernetes objects: a bad shape names the object and the field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.wire.errors import InvalidObject


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise InvalidObject.at(f"{obj.get('kind')}: metadata", "must be an object")
    return meta


def object_list(raw: object, path: str) -> list[Mapping[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(x, Mapping) for x in raw):
        raise InvalidObject.at(path, "must be a list of objects")
    return raw


def string_map(raw: object, path: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InvalidObject.at(path, "must be a map of strings")
    return {str(k): str(v) for k, v in raw.items()}
