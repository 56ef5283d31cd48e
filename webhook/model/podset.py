"""One view per PodSet, built once per workload: what every later step reads of a template.

Validation, injection, gang labelling, the UPDATE fingerprint and scoring all read the same few
things of a PodSet's pod template: its TAS annotations and gang labels as strings, the parsed
topology request and slice constraints, and its scheduling constraints. Reading them once, with
one coercion rule, keeps the steps from disagreeing about what the user wrote.

Kubernetes metadata maps hold strings only. A manifest written by hand often does not (an
unquoted ``podset-slice-size: 4`` in YAML is an integer); the API server would refuse it with a
decoding error. Here each such value becomes one clear error, and the readers go on with the
value's text so that the rest of the report is still about the user's intent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from types import MappingProxyType
from typing import Any

from scorer.model import Mode, PodSetRequest, SliceLayer, TopologyRequest
from webhook.model import annotations as ann
from webhook.model.constraints import Constraints, parse_constraints
from webhook.model.gosyntax import go_value, invalid, parse_bool, parse_int
from webhook.model.paths import Key, field_path, key
from webhook.model.scheduling import read_scheduling
from webhook.model.workloads import PodSetTemplate, WorkloadPodSets
from webhook.wire.errors import FieldError

# Kueue's TrainJob webhook appends this to every TAS error it reports (trainjob_webhook.go).
TRAINJOB_HINT = (
    '. Adjust either the "TrainJob.spec.runtimePatches" or the "TrainingRuntime.Template" '
    "annotations for the corresponding Job"
)

READ_ANNOTATIONS = (*ann.TAS_ANNOTATIONS, *ann.VOLCANO_GROUP_ANNOTATIONS)
READ_LABELS = (*ann.COSCHEDULING_LABELS, ann.LIGHTWEIGHT_MIN_AVAILABLE_LABEL)


@dataclass(frozen=True)
class PodSetView:
    """One PodSet with string-only annotations/labels, its parsed request, and error paths.

    ``annotations_path`` is where Kueue reports this PodSet's TAS errors: the pod template's
    ``metadata.annotations`` in the object (``metadata.annotations`` for a Pod), or Kueue's
    ``job[<name>].annotations`` for a TrainJob, whose templates live in the runtime. ``hint`` is
    what Kueue appends to every TAS error detail for that kind. ``request`` is the TAS request
    as Kueue's PodSet builder reads it (lenient: values that do not parse are left out, the
    rules report them).
    """

    pod_set: PodSetTemplate
    annotations: Mapping[str, str]
    labels: Mapping[str, str]
    annotations_path: str
    labels_path: str
    constraints: Constraints | None
    request: TopologyRequest
    hint: str = ""

    @property
    def name(self) -> str:
        return self.pod_set.name

    @property
    def count(self) -> int:
        return self.pod_set.count

    @property
    def explicit_tas(self) -> bool:
        """Kueue's ``IsExplicitlyRequestingTAS``: any TAS request annotation is present (even a
        false unconstrained one); the group name and pod-index offset alone do not count."""
        return any(name in self.annotations for name in ann.EXPLICIT_TAS_ANNOTATIONS)

    def annotation_path(self, name: str) -> str:
        return key(self.annotations_path, name)

    def label_path(self, name: str) -> str:
        return key(self.labels_path, name)

    @cached_property
    def _scorer_base(self) -> PodSetRequest:
        spec = self.pod_set.template.get("spec") or {}
        where = field_path((*self.pod_set.template_path, "spec"))
        found = read_scheduling(spec, where)
        return PodSetRequest(
            name=self.pod_set.name,
            count=self.pod_set.count,
            requests=dict(self.pod_set.requests),
            topology=self.request,
            tolerations=found.tolerations,
            node_selector=found.node_selector,
            affinity=found.affinity,
        )

    def scorer_request(self, topology: TopologyRequest | None = None) -> PodSetRequest:
        """The scorer's request for this PodSet, with ``topology`` in place of the written one.

        The template's constraints are read on first use only; a bad nodeSelector or
        toleration raises ``InvalidObject`` naming its field.
        """
        base = self._scorer_base
        return base if topology is None or topology == base.topology else replace(base, topology=topology)


@dataclass(frozen=True)
class WorkloadView:
    """A workload's PodSets as views, plus the type errors found while reading their metadata."""

    workload: WorkloadPodSets
    pod_sets: tuple[PodSetView, ...]
    read_errors: tuple[FieldError, ...]


def view_workload(wl: WorkloadPodSets) -> WorkloadView:
    """Read every PodSet's template metadata once."""
    out: list[PodSetView] = []
    errors: list[FieldError] = []
    for ps in wl.pod_sets:
        out.append(_view(wl, ps, errors))
    return WorkloadView(wl, tuple(out), tuple(errors))


def _view(wl: WorkloadPodSets, ps: PodSetTemplate, errors: list[FieldError]) -> PodSetView:
    if wl.kind == "TrainJob":
        base, hint = field_path(("job", Key(ps.name))), TRAINJOB_HINT
    else:
        base, hint = field_path((*ps.template_path, "metadata")), ""
    meta = ps.template.get("metadata")
    if meta is not None and not isinstance(meta, Mapping):
        errors.append(invalid(base, meta, "must be an object"))
        meta = None
    meta = meta or {}
    annotations = _strings(meta.get("annotations"), f"{base}.annotations", READ_ANNOTATIONS, errors)
    labels = _strings(meta.get("labels"), f"{base}.labels", READ_LABELS, errors)
    raw = annotations.get(ann.PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS)
    constraints = parse_constraints(raw) if raw is not None else None
    return PodSetView(
        pod_set=ps,
        annotations=MappingProxyType(annotations),
        labels=MappingProxyType(labels),
        annotations_path=f"{base}.annotations",
        labels_path=f"{base}.labels",
        constraints=constraints,
        request=topology_request(annotations, constraints),
        hint=hint,
    )


def topology_request(
    annotations: Mapping[str, str], constraints: Constraints | None = None
) -> TopologyRequest:
    """The TAS request the annotations make, read the way Kueue's PodSet builder reads them.

    Required wins over preferred, preferred over unconstrained ("true" in any Go spelling). Slice
    annotations without a mode annotation make the PodSet unconstrained, as in Kueue's slice-only
    requests. Values that do not parse are skipped rather than raised: validation reports them.
    """
    text = {k: v for k, v in annotations.items() if isinstance(v, str)}
    mode, level = Mode.NONE, None
    if ann.PODSET_REQUIRED_TOPOLOGY in text:
        mode, level = Mode.REQUIRED, text[ann.PODSET_REQUIRED_TOPOLOGY]
    elif ann.PODSET_PREFERRED_TOPOLOGY in text:
        mode, level = Mode.PREFERRED, text[ann.PODSET_PREFERRED_TOPOLOGY]
    elif parse_bool(text.get(ann.PODSET_UNCONSTRAINED_TOPOLOGY, "")):
        mode = Mode.UNCONSTRAINED

    slice_level = text.get(ann.PODSET_SLICE_REQUIRED_TOPOLOGY)
    slice_size = parse_int(text.get(ann.PODSET_SLICE_SIZE, ""))
    if slice_level is None or slice_size is None or slice_size < 1:
        slice_level, slice_size = None, None
    raw = text.get(ann.PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS)
    if constraints is None and raw is not None:
        constraints = parse_constraints(raw)
    layers = _layers(constraints)
    if mode is Mode.NONE and (slice_level is not None or layers):
        mode = Mode.UNCONSTRAINED

    group = text.get(ann.PODSET_GROUP_NAME) if mode in (Mode.REQUIRED, Mode.PREFERRED) else None
    return TopologyRequest(
        mode=mode,
        level=level,
        slice_level=slice_level,
        slice_size=slice_size,
        slice_layers=layers,
        group=group,
    )


def _layers(constraints: Constraints | None) -> tuple[SliceLayer, ...]:
    if constraints is None or not constraints.usable:
        return ()
    if any(layer.size < 1 or not layer.topology for layer in constraints.layers):
        return ()
    return tuple(SliceLayer(layer.topology, layer.size) for layer in constraints.layers)


def _strings(raw: Any, path: str, names: tuple[str, ...], errors: list[FieldError]) -> dict[str, str]:
    """The ``names`` entries of a metadata map as text; each non-string value is one error."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        errors.append(
            FieldError(
                path, f"{go_value(raw)}: must be a map of string keys to string values", "Invalid value"
            )
        )
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
        detail = f"must be a string; quote the value in YAML, e.g. {json.dumps(text)}"
        errors.append(invalid(key(path, name), value, detail))
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
