"""Gang-scheduling labels and the PodGroup objects they need.

A pod labelled for Coscheduling (or annotated for Volcano) whose PodGroup does not exist never
schedules, so whenever a workload's templates name a group for the policy's backend, the
decision lists the PodGroup to create: minMember = every pod of the workload, minResources =
their summed requests. Workloads whose operator makes PodGroups itself are left alone.

A batch Job Kueue may admit partially (``kueue.x-k8s.io/job-min-parallelism``) runs only the
pods Kueue admits, and a quorum of every pod would then never be met: its PodGroup carries
``PARTIAL_MINIMUM`` (Kueue's minimum), and the live writer sizes minMember and minResources to
the count in the Workload's admission, to that minimum until the admission is known
(``resized``; ``live.reconcile_admission``). The verdict says so in a warning.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from webhook.decide.gangs import GANG_BACKENDS
from webhook.decide.gangs.base import GangBackend
from webhook.decide.patch import Entry
from webhook.decide.policy import Gang
from webhook.model import annotations as ann
from webhook.model.podset import PodSetView, WorkloadView
from webhook.model.quantity import canonical, format_quantity, parse_quantity
from webhook.model.workloads import PodSetTemplate, WorkloadPodSets
from webhook.rules.tasgate import leftover_slices

MAX_NAME = 63  # the name is also the Coscheduling label's value, which Kubernetes caps at 63
# On a PodGroup whose pods Kueue may admit partially: the fewest Kueue admits. Its minMember and
# minResources follow the admitted count (the full count is what the decision lists).
PARTIAL_MINIMUM = "tasgate.io/partial-admission-minimum"


def group_name(obj: Mapping[str, Any], uid: str) -> str:
    """The PodGroup's name: the workload's, or a stable one when only generateName is known.

    Every pod of a Kueue pod group is admitted on its own: they share the group's name, so that
    they all join the one PodGroup whose minMember counts them all. The name is the value of
    the Coscheduling label too, so one longer than a label value may be (a JobSet may be named
    with up to 253 characters) is cut and told apart by a hash of the whole: a label the API
    server refuses would fail the user's apply, which tasgate's absence would not.
    """
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    if obj.get("kind") == "Pod" and isinstance(labels, Mapping) and labels.get(ann.POD_GROUP_NAME_LABEL):
        return _label_value(str(labels[ann.POD_GROUP_NAME_LABEL]))
    if meta.get("name"):
        return _label_value(str(meta["name"]))
    stem = str(meta.get("generateName") or "workload").rstrip("-.") or "workload"
    return _label_value(f"{stem}-{_digest(uid or repr(sorted(meta.items())))}")


def _label_value(name: str) -> str:
    """``name`` when it is short enough for a label value, else its head and a hash of it."""
    if len(name) <= MAX_NAME:
        return name
    head = name[: MAX_NAME - 9].rstrip("-._") or "workload"
    return f"{head}-{_digest(name)}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def gang_entries(view: WorkloadView, gang: Gang | None, name: str) -> list[Entry]:
    """Label/annotate every template for the backend, unless something already owns the gang."""
    wl = view.workload
    if (
        gang is None
        or gang.backend == "none"
        or wl.operator_gang is not None
        or _any_gang_mark(view.pod_sets)
    ):
        return []
    backend = GANG_BACKENDS[gang.backend]
    return [backend.entry(p.template_path, name) for p in members(wl)]


def pod_groups(
    view: WorkloadView, gang: Gang | None, namespace: str, entries: Sequence[Entry]
) -> list[dict[str, Any]]:
    """The PodGroup named by the templates (as written, or as the entries will write them)."""
    wl = view.workload
    if gang is None or gang.backend == "none" or wl.operator_gang is not None or not wl.pod_sets:
        return []
    backend = GANG_BACKENDS[gang.backend]
    key = backend.mark_key
    names = {e.value for e in entries if e.key == key}
    for p in view.pod_sets:
        found = p.labels.get(key) or p.annotations.get(key)
        if found:
            names.add(found)
    if len(names) != 1:
        return []
    return [_pod_group(wl, gang, backend, namespace, names.pop())]


def _pod_group(
    wl: WorkloadPodSets, gang: Gang, backend: GangBackend, namespace: str, name: str
) -> dict[str, Any]:
    total: dict[str, int] = {}
    count = 0
    for p in members(wl):
        count += p.count * wl.groups
        for resource, amount in p.requests.items():
            total[resource] = total.get(resource, 0) + amount * p.count * wl.groups
    spec: dict[str, Any] = {
        "minMember": count,
        "minResources": {r: format_quantity(r, v) for r, v in sorted(total.items())},
        **backend.spec_extras(gang.schedule_timeout_seconds),
    }
    elastic = partial_member(wl)
    annotations = {PARTIAL_MINIMUM: str(elastic.min_count)} if elastic is not None else {}
    return backend.pod_group(namespace, name, spec, annotations)


def partial_member(wl: WorkloadPodSets) -> PodSetTemplate | None:
    """The one PodSet of a gang Kueue may admit partially (a batch Job's), else None.

    Kueue gives a minimum count (``PodSet.minCount``) to a batch Job's only PodSet and to nothing
    else, so a gang of several PodSets is never sized to an admission.
    """
    found = members(wl)
    if len(found) != 1 or wl.groups != 1 or found[0].min_count is None:
        return None
    return found[0]


def partial_minimum(group: Mapping[str, Any]) -> int | None:
    """The ``PARTIAL_MINIMUM`` a PodGroup carries (None: not one Kueue may admit partially)."""
    annotations = (group.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(PARTIAL_MINIMUM) if isinstance(annotations, Mapping) else None
    return int(text) if isinstance(text, str) and text.isdecimal() and int(text) > 0 else None


def resized(group: Mapping[str, Any], count: int) -> dict[str, Any]:
    """``group`` with minMember ``count`` and minResources for ``count`` of its pods.

    Its pods are alike (one PodSet), so one pod's requests are minResources / minMember; rounded
    down, so that a figure that does not divide never asks for more than the pods hold.
    """
    spec = dict(group.get("spec") or {})
    before = int(spec.get("minMember") or 0)
    totals = spec.get("minResources")
    if isinstance(totals, Mapping) and before > 0:
        spec["minResources"] = {
            r: format_quantity(r, _amount(r, v) // before * count) for r, v in sorted(totals.items())
        }
    spec["minMember"] = count
    return {**group, "spec": spec}


def _amount(resource: str, text: Any) -> int:
    return canonical(resource, parse_quantity(str(text), f"minResources[{resource}]"))


def members(wl: WorkloadPodSets) -> list[PodSetTemplate]:
    """The PodSets whose pods join the gang.

    Not a template the object does not hold (RayJob's default submitter), and not a RayJob's
    submitter at all: KubeRay creates it only once the cluster is up, so counting it in
    minMember would hold the cluster's pods back forever.
    """
    return [
        p for p in wl.pod_sets if not p.synthesized and not (wl.kind == "RayJob" and p.name == "submitter")
    ]


def _any_gang_mark(pod_sets: Sequence[PodSetView]) -> bool:
    return any(
        any(k in p.labels for k in ann.COSCHEDULING_LABELS) or ann.VOLCANO_GROUP_ANNOTATION in p.annotations
        for p in pod_sets
    )


def backend_for(
    wanted: Gang | None, view: WorkloadView, unserved: frozenset[str], warnings: list[str]
) -> Gang | None:
    """The gang the policy asks for, or None where adding it would do harm, said in ``warnings``:
    a PodGroup CRD that is not served (its pods would never schedule), several replica groups
    (Kueue admits each on its own), slices that do not divide the count (a gang of every pod
    never starts when only whole slices are placed: ``decide.kueue.slices``)."""
    if wanted is None or wanted.backend == "none":
        return wanted
    if wanted.backend == "native":  # `decide.native.inject`: on the native objects, not here
        warnings.append(
            "no gang added: tasgate makes a native Workload and PodGroup (scheduling.k8s.io/v1alpha2) "
            "only for a new, named workload outside any Kueue queue while that API is served; "
            "this one is not such a workload"
        )
        return None
    backend = GANG_BACKENDS.get(wanted.backend)
    if backend is not None and backend.served_kind in unserved:
        warnings.append(
            f"no gang labels added: the {backend.crd} CRD is not served, and pods labelled for a "
            "PodGroup that cannot exist never schedule"
        )
        return None
    groups = view.workload.groups
    if groups > 1:
        warnings.append(f"no gang labels added: its {groups} replica groups are separate gangs")
        return None
    if any(leftover_slices(p) is not None for p in view.pod_sets):  # `kueue.slices` says why
        return None
    note = _partial_note(view, wanted)
    if note is not None:
        warnings.append(note)
    return wanted


def _partial_note(view: WorkloadView, gang: Gang) -> str | None:
    """What the PodGroup's minMember will be when Kueue may admit fewer pods than the Job asks
    for: the count it admits, which the decision cannot know (the live writer reads it)."""
    elastic = partial_member(view.workload)
    if elastic is None or not pod_groups(view, gang, "", gang_entries(view, gang, "-")):
        return None
    return (
        f"the PodGroup's minMember={elastic.count} follows the count Kueue admits (as few as "
        f"{elastic.min_count} under partial admission; set from the Workload's admission)"
    )
