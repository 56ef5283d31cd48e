"""admission.k8s.io/v1 on the wire: parse an AdmissionReview, build its response.

Pure functions over bytes and dicts; the aiohttp handlers only move bytes in and out. A body
that is not a usable AdmissionReview raises `MalformedReview`, which carries the request uid
when one could be read, so the caller can still answer with an AdmissionReview.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from webhook.wire.durations import parse_duration
from webhook.wire.errors import BadRequest

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
MAX_BODY_BYTES = 7 * 1024 * 1024  # an UPDATE carries two objects; etcd's limit is 1.5 MiB each
# The deepest nesting accepted anywhere in a review. Real objects stay far below it (a JobSet's
# container resources sit 14 levels down; affinity terms add a handful); the decision path may
# recurse over values and print them, so a value nested 1000 deep must be refused here, not
# crash there. orjson itself stops at 1024.
MAX_DEPTH = 100


class MalformedReview(BadRequest):
    """The body is not a usable AdmissionReview; ``uid`` is set when one could be read."""

    def __init__(self, message: str, uid: str = "") -> None:
        super().__init__(message)
        self.uid = uid


@dataclass(frozen=True)
class AdmissionRequest:
    uid: str
    kind: str
    group: str
    version: str
    resource: str
    sub_resource: str
    operation: str
    namespace: str
    name: str
    obj: Mapping[str, Any] | None
    old_obj: Mapping[str, Any] | None
    user: str
    dry_run: bool
    resource_group: str = ""  # request.resource: for a subresource (scale) the parent's group
    resource_version: str = ""


def parse_review(body: bytes) -> AdmissionRequest:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedReview(f"body is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise MalformedReview("body is not a JSON object")
    req = doc.get("request")
    uid = str(req.get("uid") or "") if isinstance(req, dict) and isinstance(req.get("uid"), str) else ""
    if too_deep(doc, MAX_DEPTH):
        raise MalformedReview(f"the review nests values more than {MAX_DEPTH} levels deep", uid)
    if doc.get("kind") != KIND or doc.get("apiVersion") != API_VERSION:
        raise MalformedReview(f"expected apiVersion {API_VERSION} and kind {KIND}", uid)
    if not isinstance(req, dict):
        raise MalformedReview("AdmissionReview has no request", uid)
    return _request(req, uid)


def too_deep(doc: object, limit: int = MAX_DEPTH) -> bool:
    """Whether any value sits more than ``limit`` containers deep.

    Level by level, without recursion; on a 7 MiB body of empty lists it costs a third of what
    parsing it did.
    """
    level: list[Any] = [doc] if type(doc) in (dict, list) else []
    depth = 1
    while level:
        if depth > limit:
            return True
        below: list[Any] = []
        add = below.append
        for value in level:
            for child in value.values() if type(value) is dict else value:
                kind = type(child)
                if kind is dict or kind is list:
                    add(child)
        level = below
        depth += 1
    return False


def _request(req: dict[str, Any], uid: str) -> AdmissionRequest:
    if not uid:
        raise MalformedReview("request.uid is missing")
    operation = req.get("operation")
    if operation not in ("CREATE", "UPDATE", "DELETE", "CONNECT"):
        raise MalformedReview(
            f"request.operation {operation!r} is not CREATE, UPDATE, DELETE or CONNECT", uid
        )
    obj, old = req.get("object"), req.get("oldObject")
    if operation in ("CREATE", "UPDATE") and not isinstance(obj, dict):
        raise MalformedReview("request.object is missing or not an object", uid)
    kind, user, resource = _obj(req.get("kind")), _obj(req.get("userInfo")), _obj(req.get("resource"))
    return AdmissionRequest(
        uid=uid,
        kind=str(kind.get("kind", "")),
        group=str(kind.get("group", "")),
        version=str(kind.get("version", "")),
        resource=str(resource.get("resource", "")),
        sub_resource=str(req.get("subResource") or ""),
        operation=str(operation),
        namespace=str(req.get("namespace") or ""),
        name=str(req.get("name") or ""),
        obj=obj if isinstance(obj, dict) else None,
        old_obj=old if isinstance(old, dict) else None,
        user=str(user.get("username", "")),
        dry_run=bool(req.get("dryRun", False)),
        resource_group=str(resource.get("group", "")),
        resource_version=str(resource.get("version", "")),
    )


def _obj(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def review_response(
    uid: str,
    allowed: bool,
    *,
    code: int | None = None,
    message: str = "",
    warnings: Sequence[str] = (),
    patch: Sequence[Mapping[str, Any]] = (),
    audit: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The AdmissionReview answer; a patch only when there is one (validating never sends one)."""
    response: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if not allowed or message:
        response["status"] = {"code": code or (403 if not allowed else 200), "message": message}
        if not allowed:
            response["status"]["reason"] = "Forbidden" if (code or 403) == 403 else "Invalid"
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(list(patch))).decode()
    if warnings:
        response["warnings"] = list(warnings)
    if audit:
        response["auditAnnotations"] = dict(audit)
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


def parse_timeout(raw: str | None, default: float = 10.0) -> float:
    """The API server's ``?timeout=10s`` (a Go duration, at most a minute), else ``default``."""
    if not raw:
        return default
    try:
        value = parse_duration(raw)
    except ValueError:
        return default
    return value if value <= 60 else default
