"""Each PodSet's template metadata as the validators read it: checked strings and field paths.

Kubernetes metadata maps hold strings only. A manifest written by hand often does not (an
unquoted ``podset-slice-size: 4`` in YAML is an integer); the API server would refuse it with a
decoding error. Here each such value becomes one clear error, and the validators go on with the
value's text so that the rest of the report is still about the user's intent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from webhook.annotations import (
    COSCHEDULING_LABELS,
    LIGHTWEIGHT_MIN_AVAILABLE_LABEL,
    TAS_ANNOTATIONS,
    VOLCANO_GROUP_ANNOTATIONS,
)
from webhook.errors import FieldError
from webhook.validation_gofmt import go_value, invalid, key
from webhook.workloads import PodSetTemplate, WorkloadPodSets, field_path
from webhook.workloads.base import Key

# Kueue's TrainJob webhook appends this to every TAS error it reports (trainjob_webhook.go).
TRAINJOB_HINT = (
    '. Adjust either the "TrainJob.spec.podTemplateOverrides" or the "TrainingRuntime.Template" '
    "annotations for the corresponding Job"
)

_READ_ANNOTATIONS = (*TAS_ANNOTATIONS, *VOLCANO_GROUP_ANNOTATIONS)
_READ_LABELS = (*COSCHEDULING_LABELS, LIGHTWEIGHT_MIN_AVAILABLE_LABEL)


@dataclass(frozen=True)
class PodSetView:
    """One PodSet with string-only annotations/labels and the paths errors are reported at.

    ``annotations_path`` is where Kueue reports this PodSet's TAS errors: the pod template's
    ``metadata.annotations`` in the object (``metadata.annotations`` for a Pod), or Kueue's
    ``job[<name>].annotations`` for a TrainJob, whose templates live in the runtime. ``hint`` is
    what Kueue appends to every TAS error detail for that kind.
    """

    pod_set: PodSetTemplate
    annotations: Mapping[str, str]
    labels: Mapping[str, str]
    annotations_path: str
    labels_path: str
    hint: str = ""

    @property
    def count(self) -> int:
        return self.pod_set.count

    def annotation_path(self, name: str) -> str:
        return key(self.annotations_path, name)

    def label_path(self, name: str) -> str:
        return key(self.labels_path, name)


def views(wl: WorkloadPodSets) -> tuple[list[PodSetView], list[FieldError]]:
    """The PodSets of ``wl`` as views, plus the type errors found while reading them."""
    out, errors = [], []
    for ps in wl.pod_sets:
        if wl.kind == "TrainJob":
            base, hint = field_path(("job", Key(ps.name))), TRAINJOB_HINT
        else:
            base, hint = field_path((*ps.template_path, "metadata")), ""
        meta = ps.template.get("metadata")
        if meta is not None and not isinstance(meta, Mapping):
            errors.append(invalid(base, meta, "must be an object"))
            meta = None
        meta = meta or {}
        annotations = _strings(meta.get("annotations"), f"{base}.annotations", _READ_ANNOTATIONS, errors)
        labels = _strings(meta.get("labels"), f"{base}.labels", _READ_LABELS, errors)
        out.append(
            PodSetView(
                ps,
                MappingProxyType(annotations),
                MappingProxyType(labels),
                f"{base}.annotations",
                f"{base}.labels",
                hint,
            )
        )
    return out, errors


def _strings(raw: Any, path: str, names: tuple[str, ...], errors: list[FieldError]) -> dict[str, str]:
    """The ``names`` entries of a metadata map as text; each non-string value is one error."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        errors.append(invalid(path, raw, "must be a map of string keys to string values"))
        return {}
    found: dict[str, str] = {}
    for name in names:
        if name not in raw:
            continue
        value = raw[name]
        if isinstance(value, str):
            found[name] = value
            continue
        text = as_text(value)
        errors.append(
            invalid(
                key(path, name), value, f"must be a string; quote the value in YAML, e.g. {json.dumps(text)}"
            )
        )
        found[name] = text
    return found


def as_text(value: object) -> str:
    """The text a hand-written non-string value most likely meant (``4`` → ``"4"``)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return go_value(value)
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)
