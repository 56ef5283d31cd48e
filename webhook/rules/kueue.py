"""Kueue's own TAS annotation checks, with Kueue's field paths and words.

A faithful port of kubernetes-sigs/kueue ``pkg/controller/jobframework/tas_validation.go`` as of
Kueue main in August 2026 (v0.19/v0.20-devel, default feature gates: ``TASMultiLayerTopology``
Beta and on; ``TASGroupedPodSetSlicing`` not yet merged, so a PodSet group may not be sliced).
With ``TASMultiLayerTopology`` off Kueue refuses the constraints annotation outright, whatever it
holds, and reads no constraint from it (``multi_layer=False``; proven on the real Kueue with the
gate off, tests/e2e/test_kueue_gates_webhook.py):

- ``ValidateTASPodSetRequest``: per PodSet, on its template's annotations.
- ``ValidateSliceSizeAnnotationUpperBound``: slice size (or the first constraint layer's size)
  against the PodSet's pod count.
- ``ValidatePodSetGroupingTopology``: ``podset-group-name`` groups across PodSets.

Kueue runs the grouping check for JobSet, MPIJob, LeaderWorkerSet, RayJob and RayCluster and the
upper bound for every kind but plain Pods; tasgate runs both for every kind (a Pod only sees its
own group member, so grouping is skipped there).
"""

from __future__ import annotations

from collections.abc import Sequence

from webhook.model.annotations import (
    JOB_MIN_PARALLELISM_ANNOTATION,
    PODSET_GROUP_NAME,
    PODSET_PREFERRED_TOPOLOGY,
    PODSET_REQUIRED_TOPOLOGY,
    PODSET_SLICE_REQUIRED_TOPOLOGY,
    PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS,
    PODSET_SLICE_SIZE,
    PODSET_UNCONSTRAINED_TOPOLOGY,
)
from webhook.model.constraints import MAX_LAYERS
from webhook.model.gosyntax import (
    DUPLICATE,
    FORBIDDEN,
    INVALID,
    OMIT,
    REQUIRED,
    error,
    go_quote,
    parse_bool,
    parse_int,
    parse_uint64,
)
from webhook.model.paths import key
from webhook.model.podset import PodSetView
from webhook.model.workloads import WorkloadPodSets
from webhook.rules.labelnames import label_key_errors
from webhook.wire.errors import FieldError

# Kueue's errTopologyConstraintsLayerCount (pkg/controller/jobframework/tas.go).
LAYER_COUNT_DETAIL = f"topology constraints must contain between 1 and {MAX_LAYERS} entries"
GATE_OFF_DETAIL = "the TASMultiLayerTopology feature gate must be enabled to use this annotation"


class _Report:
    """Collects one PodSet's errors, adding Kueue's per-kind hint to every detail."""

    def __init__(self, view: PodSetView) -> None:
        self.view = view
        self.errors: list[FieldError] = []

    def add(self, kind: str, path: str, detail: str, value: object = OMIT) -> None:
        self.errors.append(error(kind, path, detail + self.view.hint, value))

    def label_name(self, value: str, path: str) -> None:
        for msg in label_key_errors(value):
            self.add(INVALID, path, msg, value)


def validate_pod_set_request(view: PodSetView, multi_layer: bool = True) -> list[FieldError]:
    """``ValidateTASPodSetRequest`` for one PodSet, errors in Kueue's order; ``multi_layer``:
    Kueue's ``TASMultiLayerTopology`` gate."""
    ann, at, report = view.annotations, view.annotation_path, _Report(view)
    required, preferred = ann.get(PODSET_REQUIRED_TOPOLOGY), ann.get(PODSET_PREFERRED_TOPOLOGY)
    slice_level, size = ann.get(PODSET_SLICE_REQUIRED_TOPOLOGY), ann.get(PODSET_SLICE_SIZE)
    group = ann.get(PODSET_GROUP_NAME)

    modes = (required, preferred, ann.get(PODSET_UNCONSTRAINED_TOPOLOGY))
    if sum(mode is not None for mode in modes) > 1:
        report.add(
            INVALID,
            view.annotations_path,
            "must not contain more than one topology annotation: "
            f'["{PODSET_REQUIRED_TOPOLOGY}", "{PODSET_PREFERRED_TOPOLOGY}", '
            f'"{PODSET_UNCONSTRAINED_TOPOLOGY}"]',
        )
    for name, value in (
        (PODSET_REQUIRED_TOPOLOGY, required),
        (PODSET_PREFERRED_TOPOLOGY, preferred),
        (PODSET_SLICE_REQUIRED_TOPOLOGY, slice_level),
    ):
        if value is not None:
            report.label_name(value, at(name))

    if group is not None:
        if parse_uint64(group) is not None:
            report.add(INVALID, at(PODSET_GROUP_NAME), "must not be a number", group)
        for name, found in ((PODSET_SLICE_SIZE, size), (PODSET_SLICE_REQUIRED_TOPOLOGY, slice_level)):
            if found is not None:
                report.add(FORBIDDEN, at(PODSET_GROUP_NAME), f"may not be set when '{name}' is specified")
        if required is None and preferred is None:
            report.add(
                FORBIDDEN,
                at(PODSET_GROUP_NAME),
                f"may not be set when neither '{PODSET_PREFERRED_TOPOLOGY}' nor "
                f"'{PODSET_REQUIRED_TOPOLOGY}' is specified",
            )

    unconstrained = ann.get(PODSET_UNCONSTRAINED_TOPOLOGY)
    if unconstrained is not None and parse_bool(unconstrained) is None:
        report.add(INVALID, at(PODSET_UNCONSTRAINED_TOPOLOGY), "must be a boolean value", unconstrained)
    if size is not None:
        parsed = parse_int(size)
        if parsed is None:
            report.add(INVALID, at(PODSET_SLICE_SIZE), "must be a numeric value", size)
        elif parsed < 1:
            report.add(INVALID, at(PODSET_SLICE_SIZE), "must be greater than or equal to 1", size)

    if slice_level is not None and size is None:
        report.add(
            REQUIRED,
            at(PODSET_SLICE_SIZE),
            f"must be set when '{PODSET_SLICE_REQUIRED_TOPOLOGY}' is specified",
        )
    if slice_level is None and size is not None:
        report.add(
            FORBIDDEN,
            at(PODSET_SLICE_SIZE),
            f"may not be set when '{PODSET_SLICE_REQUIRED_TOPOLOGY}' is not specified",
        )
    _constraints(report, slice_level is not None, size is not None, group is not None, multi_layer)
    return report.errors


def _constraints(report: _Report, slice_level: bool, slice_size: bool, grouped: bool, gate: bool) -> None:
    """``validateSliceRequiredTopologyConstraintsAnnotation``; ``gate``: TASMultiLayerTopology."""
    raw = report.view.annotations.get(PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS)
    parsed = report.view.constraints
    path = report.view.annotation_path(PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS)
    if raw is not None and not gate:
        report.add(FORBIDDEN, path, GATE_OFF_DETAIL)
        return
    if raw is None or parsed is None:
        return
    for name, found in ((PODSET_SLICE_REQUIRED_TOPOLOGY, slice_level), (PODSET_SLICE_SIZE, slice_size)):
        if found:
            report.add(FORBIDDEN, path, f"may not be set when '{name}' is specified")
    if grouped:
        report.add(
            FORBIDDEN,
            report.view.annotation_path(PODSET_GROUP_NAME),
            f"may not be set when '{PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS}' is specified",
        )
    layers = parsed.layers
    if parsed.error is not None:
        report.add(INVALID, path, f"must be a valid JSON array: {parsed.error}", raw)
        return
    if not parsed.layer_count_ok:
        report.add(INVALID, path, LAYER_COUNT_DETAIL, raw)
        return
    for i, layer in enumerate(layers):
        report.label_name(layer.topology, f"{path}[{i}].topology")
        if layer.size < 1:
            report.add(INVALID, f"{path}[{i}].size", "must be greater than or equal to 1", layer.size)
    seen: dict[str, int] = {}
    for i, layer in enumerate(layers):
        if layer.topology in seen:
            report.add(
                DUPLICATE,
                f"{path}[{i}].topology",
                "",
                f"{layer.topology} (also at index {seen[layer.topology]})",
            )
        else:
            seen[layer.topology] = i
    for i in range(len(layers) - 1):
        parent, child = layers[i].size, layers[i + 1].size
        if child > 0 and _go_rem(parent, child) != 0:
            report.add(
                INVALID, f"{path}[{i + 1}].size", f"must evenly divide the parent layer size {parent}", child
            )


def _go_rem(a: int, b: int) -> int:
    """Go's ``%``: the remainder takes the dividend's sign."""
    rem = abs(a) % abs(b)
    return -rem if a < 0 else rem


def validate_upper_bound(view: PodSetView) -> list[FieldError]:
    """``ValidateSliceSizeAnnotationUpperBound``: no slice may be larger than the PodSet."""
    report, count = _Report(view), view.count
    size = view.annotations.get(PODSET_SLICE_SIZE)
    if size is not None:
        parsed = parse_int(size)
        if parsed is None:
            report.add(INVALID, view.annotation_path(PODSET_SLICE_SIZE), "must be a numeric value", size)
            return report.errors
        if parsed > count:
            report.add(
                INVALID,
                view.annotation_path(PODSET_SLICE_SIZE),
                f"must not be greater than pod set count {count}",
                size,
            )
    constraints = view.constraints
    if constraints is not None:
        layers = constraints.layers
        if constraints.error is None and layers and layers[0].size > count:
            report.add(
                INVALID,
                view.annotation_path(PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS),
                f"must not be greater than pod set count {count}",
                layers[0].size,
            )
    return report.errors


def validate_grouping(pod_set_views: Sequence[PodSetView]) -> list[FieldError]:
    """``ValidatePodSetGroupingTopology`` over the PodSets that join a group.

    A PodSet joins its group only when it also asks for required or preferred topology (Kueue's
    PodSet builder drops the group name otherwise); required wins over preferred, as there.
    """
    groups: dict[str, list[PodSetView]] = {}
    for view in pod_set_views:
        name = view.annotations.get(PODSET_GROUP_NAME)
        if name is not None and _request(view) != (None, None):
            groups.setdefault(name, []).append(view)
    errors: list[FieldError] = []
    for name, members in groups.items():
        if len(members) != 2:
            for view in members:
                errors.append(
                    error(
                        INVALID,
                        view.annotation_path(PODSET_GROUP_NAME),
                        f"can only define groups of exactly 2 pod sets, got: {len(members)} pod set(s)"
                        + view.hint,
                        name,
                    )
                )
            continue
        first, second = members
        if first.count != 1 and second.count != 1:
            detail = (
                "can only define groups where at least one pod set has only 1 replica, "
                f"got: {first.count} replica(s) and {second.count} replica(s) in the group"
            )
            for view in members:
                errors.append(
                    error(INVALID, view.annotation_path(PODSET_GROUP_NAME), detail + view.hint, name)
                )
        if _request(first) != _request(second):
            for view, other in ((first, second), (second, first)):
                detail = (
                    f"must specify '{PODSET_REQUIRED_TOPOLOGY}' or '{PODSET_PREFERRED_TOPOLOGY}' topology "
                    f"consistent with '{other.annotations_path}' in group '{name}'"
                )
                errors.append(error(INVALID, view.annotations_path, detail + view.hint))
    return errors


def _request(view: PodSetView) -> tuple[str | None, str | None]:
    required = view.annotations.get(PODSET_REQUIRED_TOPOLOGY)
    return (required, None if required is not None else view.annotations.get(PODSET_PREFERRED_TOPOLOGY))


def validate_partial_admission(wl: WorkloadPodSets) -> list[FieldError]:
    """``validatePartialAdmissionCreate`` of Kueue's Job webhook (job_webhook.go)."""
    raw = wl.min_parallelism
    if raw is None or wl.kind != "Job" or not wl.pod_sets:
        return []
    path = key("metadata.annotations", JOB_MIN_PARALLELISM_ANNOTATION)
    value = parse_int(raw, 64)
    if value is None:
        reason = "value out of range" if parse_int(raw, 1024) is not None else "invalid syntax"
        return [error(INVALID, path, f"strconv.Atoi: parsing {go_quote(raw)}: {reason}", raw)]
    count = wl.pod_sets[0].count
    if _int32(value) >= count or value <= 0:
        return [error(INVALID, path, f"should be between 0 and {count - 1}", value)]
    return []


def _int32(value: int) -> int:
    """Go's ``int32(v)`` of an int: the low 32 bits, signed."""
    low = value & 0xFFFFFFFF
    return low - (1 << 32) if low >= 1 << 31 else low
