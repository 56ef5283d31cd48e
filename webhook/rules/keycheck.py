"""Warnings for Kueue and tasgate keys that do nothing: unknown, misspelt, or in the wrong place.

Kueue ignores a label or annotation it does not define, and one it reads elsewhere (a TAS request
on the Job's own metadata, ``queue-name`` as an annotation). The user meant something by it, so
each gets a warning naming it, with the key it is closest to (``rules.keynames``). These are
warnings, never denials: a key Kueue ignores cannot break the workload, only make it run other
than meant. The decision also refuses to inject over a near-miss (``topology_near_misses``,
``opt_out_near_miss``): the policy would otherwise decide what the user tried to say.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from webhook.model import annotations as ann
from webhook.model.keys import TOPOLOGY_KEYS, WORKLOAD_LABEL_KEYS
from webhook.model.workloads import PodSetTemplate, WorkloadPodSets
from webhook.rules.keynames import examine

_FIELDS = (("label", "labels"), ("annotation", "annotations"))
WORKLOAD, TEMPLATE, POD = "workload", "template", "pod"  # where a metadata map sits


def key_warnings(obj: Mapping[str, Any], wl: WorkloadPodSets) -> tuple[str, ...]:
    """Every unknown, misspelt or misplaced Kueue/tasgate key on the workload and its templates."""
    pod = wl.kind == "Pod" or any(not p.template_path for p in wl.pod_sets)
    who = f'{wl.kind} "{wl.name}"' if wl.name else wl.kind
    out = _meta_warnings(obj.get("metadata"), who, POD if pod else WORKLOAD, wl.kind)
    if not pod:
        for p in wl.pod_sets:
            if not p.synthesized:
                out += _meta_warnings(p.template.get("metadata"), f'PodSet "{p.name}"', TEMPLATE, wl.kind)
    return tuple(dict.fromkeys(out))


def topology_near_misses(template: Mapping[str, Any]) -> tuple[str, ...]:
    """The keys of a pod template that look like a TAS request Kueue will not see: a misspelt
    topology key, or a topology key written as a label."""
    meta = template.get("metadata")
    found = [k for k in _keys(meta, "labels") if k in TOPOLOGY_KEYS]
    for key in (*_keys(meta, "annotations"), *_keys(meta, "labels")):
        finding = examine(key)
        if finding is not None and finding.suggestion in TOPOLOGY_KEYS:
            found.append(key)
    return tuple(dict.fromkeys(found))


def opt_out_near_miss(obj: Mapping[str, Any], pod_sets: Sequence[PodSetTemplate]) -> bool:
    """Whether the workload carries a near-miss of ``tasgate.io/inject`` (misspelt, a label, or
    on a pod template): it may have meant to opt out, so nothing is added to it."""
    meta = obj.get("metadata")
    if ann.INJECT_OPT_OUT in _keys(meta, "labels"):
        return True
    templates = [p.template.get("metadata") for p in pod_sets if p.template_path]
    if any(ann.INJECT_OPT_OUT in _keys(m, field) for m in templates for _, field in _FIELDS):
        return True
    keys = (k for m in (meta, *templates) for _, field in _FIELDS for k in _keys(m, field))
    return any(_misspelt_opt_out(k) for k in keys)


def _misspelt_opt_out(key: str) -> bool:
    finding = examine(key)
    return finding is not None and finding.suggestion == ann.INJECT_OPT_OUT


def _meta_warnings(meta: object, who: str, place: str, kind: str) -> list[str]:
    out = []
    for what, field in _FIELDS:
        for key in _keys(meta, field):
            text = _misplaced(key, what, place, kind) or _unknown(key, what)
            if text:
                out.append(f"{who}: {text}")
    return out


def _unknown(key: str, what: str) -> str | None:
    finding = examine(key)
    if finding is None:
        return None
    owner, suggestion = finding.family.owner, finding.suggestion
    head = f'unknown {what} "{key}"' if finding.own else f'{what} "{key}" is not a {owner} key'
    if suggestion is None:
        return f"{head}: {owner} defines no such key and ignores it"
    text = f'{head}; did you mean "{suggestion}"? {owner} ignores it'
    if suggestion == ann.INJECT_OPT_OUT:
        text += ", and adds nothing to this workload until it is fixed"
    return text


def _misplaced(key: str, what: str, place: str, kind: str) -> str | None:
    """A known key where its reader does not look: what it has, and where it belongs."""
    where = None
    if key in ann.TAS_ANNOTATIONS:
        if what == "label":
            where = "Kueue reads it as an annotation" + ("" if place == POD else " of the pod template")
        elif place == WORKLOAD:
            where = f"Kueue reads it from the pod template's annotations, not the {kind}'s own"
    elif key in WORKLOAD_LABEL_KEYS and what == "annotation" and place != TEMPLATE:
        where = "Kueue reads it as a label"
    elif key == ann.INJECT_OPT_OUT and (what == "label" or place == TEMPLATE):
        where = f"tasgate reads it as an annotation of the {kind} itself; it adds nothing meanwhile"
    return f'{what} "{key}" has no effect here: {where}' if where else None


def _keys(meta: object, field: str) -> Iterable[str]:
    """The string keys of ``meta[field]`` (nothing when either is not a map: reported elsewhere)."""
    values = meta.get(field) if isinstance(meta, Mapping) else None
    return [k for k in values if isinstance(k, str)] if isinstance(values, Mapping) else []
