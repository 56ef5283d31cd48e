"""tasgate's own topology checks: what Kueue cannot know at admission time, tasgate can.

Kueue's webhook sees only the annotations. tasgate also knows the Topology's levels (coarsest
first) and which nodes the workload's flavor selects, so it rejects requests that could never be
placed: a level the Topology does not have, a level no matching node carries, a slice level
coarser than the PodSet's own level, constraint layers out of coarse-to-fine order, a false
``podset-unconstrained-topology`` and a pod-index offset Kueue's ungater cannot parse.

A slice size that does not divide the pod count is not invalid: Kueue admits such a PodSet with a
placement of whole slices only. ``leftover_slices`` finds it, and the decision says what becomes
of the pods left over (``decide.messages.leftover_slices``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from webhook.model.annotations import (
    POD_INDEX_OFFSET,
    PODSET_PREFERRED_TOPOLOGY,
    PODSET_REQUIRED_TOPOLOGY,
    PODSET_SLICE_REQUIRED_TOPOLOGY,
    PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS,
    PODSET_UNCONSTRAINED_TOPOLOGY,
)
from webhook.model.constraints import Layer
from webhook.model.gosyntax import UNSUPPORTED, error, go_quote, invalid, parse_bool, parse_int
from webhook.model.podset import PodSetView
from webhook.rules.labelnames import label_key_errors
from webhook.wire.errors import FieldError

LevelHasNodes = Callable[[str], bool]


class Levels:
    """The Topology's levels (coarsest first) and node coverage; each level is asked about once."""

    def __init__(self, levels: Sequence[str] | None, has_nodes: LevelHasNodes | None) -> None:
        self.order = {level: i for i, level in enumerate(levels)} if levels is not None else None
        self.levels = tuple(levels or ())
        self.has_nodes = has_nodes
        self._covered: dict[str, bool] = {}

    def check(self, value: str, path: str) -> list[FieldError]:
        """Errors for one requested level: unknown to the Topology, or on no matching node."""
        if label_key_errors(value):
            return []  # Kueue already reports a malformed label name
        if self.order is not None and value not in self.order:
            listing = ", ".join(go_quote(level) for level in self.levels)  # said only when wrong
            detail = f"supported values: {listing}" if listing else "the Topology has no levels"
            return [error(UNSUPPORTED, path, f"not a level of the Topology; {detail}", value)]
        if self.has_nodes is None:
            return []
        if value not in self._covered:
            self._covered[value] = bool(self.has_nodes(value))
        if self._covered[value]:
            return []
        detail = "no node this workload can run on carries this label, so the pods could never be placed"
        return [invalid(path, value, detail)]

    def coarser(self, value: str, than: str) -> bool:
        """Whether level ``value`` sits above ``than`` (both known levels)."""
        if self.order is None or value not in self.order or than not in self.order:
            return False
        return self.order[value] < self.order[than]


def validate_topology(view: PodSetView, known: Levels) -> list[FieldError]:
    """tasgate's topology rules for one PodSet, over annotations Kueue's rules also read."""
    ann, at = view.annotations, view.annotation_path
    errors: list[FieldError] = []
    for name in (PODSET_REQUIRED_TOPOLOGY, PODSET_PREFERRED_TOPOLOGY, PODSET_SLICE_REQUIRED_TOPOLOGY):
        if name in ann:
            errors += known.check(ann[name], at(name))

    mode_name = PODSET_REQUIRED_TOPOLOGY if PODSET_REQUIRED_TOPOLOGY in ann else PODSET_PREFERRED_TOPOLOGY
    level = ann.get(mode_name)
    mode = "required" if mode_name == PODSET_REQUIRED_TOPOLOGY else "preferred"
    slice_level = ann.get(PODSET_SLICE_REQUIRED_TOPOLOGY)
    if level is not None and slice_level is not None and known.coarser(slice_level, level):
        errors.append(invalid(at(PODSET_SLICE_REQUIRED_TOPOLOGY), slice_level, _coarser(mode, level)))

    if view.constraints is not None and view.constraints.usable:
        errors += _layers(view, view.constraints.layers, known, mode, level)
    errors += _unconstrained(view)
    errors += _pod_index_offset(view)
    return errors


def _layers(
    view: PodSetView, layers: Sequence[Layer], known: Levels, mode: str, level: str | None
) -> list[FieldError]:
    path = view.annotation_path(PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS)
    errors: list[FieldError] = []
    for i, layer in enumerate(layers):
        at = f"{path}[{i}].topology"
        errors += known.check(layer.topology, at)
        if level is not None and known.coarser(layer.topology, level):
            errors.append(invalid(at, layer.topology, _coarser(mode, level)))
        elif i and known.coarser(layer.topology, layers[i - 1].topology):
            detail = (
                f"is coarser than the layer before it ({go_quote(layers[i - 1].topology)}); "
                "layers go from the coarsest level to the finest"
            )
            errors.append(invalid(at, layer.topology, detail))
    return errors


def _coarser(mode: str, level: str) -> str:
    return (
        f"is coarser than the pod set's {mode} level {go_quote(level)}; a slice must fit inside one "
        f"{go_quote(level)} domain, so use that level or a finer one"
    )


@dataclass(frozen=True, slots=True)
class Leftover:
    """A PodSet of ``count`` pods in slices of ``size`` per ``level``: Kueue places ``placed``."""

    pod_set: str
    count: int
    size: int
    level: str

    @property
    def placed(self) -> int:
        return self.count // self.size * self.size


def leftover_slices(view: PodSetView) -> Leftover | None:
    """The PodSet's outermost slice when its size does not divide the count, else None.

    Kueue's webhook checks only ``size <= count``; its TAS placement then assigns
    ``count / size`` whole slices (``updateCountsToMinimumGeneric``), and the topology ungater
    ungates no more pods than the assignment holds. Read from the parsed request, after the
    rules passed (an invalid size never gets here).
    """
    req = view.request
    layer = req.slice_layers[0] if req.slice_layers else None
    size = layer.size if layer else req.slice_size
    level = layer.level if layer else req.slice_level
    if size is None or level is None or not 1 <= size <= view.count or view.count % size == 0:
        return None
    return Leftover(view.name, view.count, size, level)


def _unconstrained(view: PodSetView) -> list[FieldError]:
    """A false ``podset-unconstrained-topology`` never runs: Kueue counts it as an explicit TAS
    request (so only TAS flavors qualify) with no level (so every TAS flavor "does not contain
    the requested level"). Every true spelling Go's ParseBool takes is fine."""
    value = view.annotations.get(PODSET_UNCONSTRAINED_TOPOLOGY)
    if value is None or parse_bool(value) is not False:
        return []  # absent, true, or already reported by Kueue's boolean check
    detail = (
        "a false value does not turn topology-aware scheduling off: Kueue then finds no flavor with "
        "the requested level and never admits the workload; remove the annotation instead"
    )
    return [invalid(view.annotation_path(PODSET_UNCONSTRAINED_TOPOLOGY), value, detail)]


def _pod_index_offset(view: PodSetView) -> list[FieldError]:
    """Kueue's topology ungater reads the offset with ``strconv.Atoi``; anything else stops it
    from ungating the workload's pods (``failed to parse offset annotation``), so they never
    start. Kueue's webhooks do not check it; its own writes are always "1"."""
    value = view.annotations.get(POD_INDEX_OFFSET)
    if value is None or parse_int(value, 64) is not None:
        return []
    detail = "must be an integer: Kueue's topology ungater cannot parse it and would never ungate the pods"
    return [invalid(view.annotation_path(POD_INDEX_OFFSET), value, detail)]
