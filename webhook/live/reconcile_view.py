"""What the PodGroup reconciler watches, kept as the few facts it acts on.

The desired state is read off the API server, never remembered: a live pod (not finished, not
being deleted) that Kueue admitted (label ``kueue.x-k8s.io/podset``) or that is labelled for a
Coscheduling PodGroup (``scheduling.x-k8s.io/pod-group``: a gang that names no Kueue queue too)
and joins a Coscheduling PodGroup or a Volcano one (annotation ``scheduling.k8s.io/group-name``;
a Volcano gang outside Kueue is seen through the review's hint only, as an annotation cannot be
selected) needs that PodGroup to exist; a labelled pod whose PodGroup
does not exist never schedules. So a ``Target`` (PodGroup apiVersion, namespace, name) is
*missing* when a live pod names it and the watched PodGroups of that kind hold none — judged
only once both lists are complete, so a fresh start never mistakes an unread list for absence.

Kueue Workloads are watched for their creation (a watch ``ADDED``, not a list): Kueue
creates one as soon as a job is, before any pod, and its controller ``ownerReference`` names
the job — an early trigger next to the validating review's. Lists of them are read and
dropped, so they cost no memory, but for the few Kueue may admit partially, whose admitted count
sizes their PodGroup (``reconcile_admission`` keeps a small record of each).

The names differ from the Mirror's and the tracker's (``reconcile-pods`` …): each watch feeds
one sink. ``View`` is the watch ``Sink``; the reconciler overrides ``wake`` and ``early``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client

from webhook.decide.gangs import GANG_BACKENDS, by_api_version
from webhook.live.kinds import KUEUE, Kind, custom_lister
from webhook.model.annotations import COSCHEDULING_LABEL
from webhook.track.records import PODSET_LABEL

PODS, GANG_PODS, WORKLOADS = "reconcile-pods", "reconcile-gang-pods", "reconcile-workloads"
# Two pod watches, as one label selector cannot say "either": the pods Kueue admitted (both
# backends), and every pod labelled for Coscheduling (gangs that name no Kueue queue too).
POD_KINDS = {PODS: PODSET_LABEL, GANG_PODS: COSCHEDULING_LABEL}
GROUP_KINDS = {f"reconcile-{b.served_kind}": b.api_version for b in GANG_BACKENDS.values()}
LIVE_PHASES = "status.phase!=Succeeded,status.phase!=Failed"
PodKey = tuple[str, str]


@dataclass(frozen=True)
class Target:
    """One PodGroup that pods name: what must exist."""

    api_version: str  # scheduling.x-k8s.io/v1alpha1 or scheduling.volcano.sh/v1beta1
    namespace: str
    name: str


@dataclass(frozen=True)
class OwnerRef:
    api_version: str
    kind: str
    name: str
    uid: str


@dataclass(frozen=True)
class GangPod:
    namespace: str
    name: str
    uid: str
    target: Target
    owner: OwnerRef | None  # its controller; None for a pod nothing owns (a Kueue plain-pod group)


def kinds() -> list[Kind]:
    """The reconciler's own watches: gang pods, both PodGroup kinds, Workload creations."""

    def pods(api: client.ApiClient) -> Any:
        return client.CoreV1Api(api).list_pod_for_all_namespaces

    found = [
        Kind(name, "v1", "Pod", pods, kwargs={"label_selector": label, "field_selector": LIVE_PHASES})
        for name, label in POD_KINDS.items()
    ]
    for name, api_version in GROUP_KINDS.items():
        group, version = api_version.split("/")
        found.append(Kind(name, api_version, "PodGroup", custom_lister(group, version, "podgroups"), True))
    workloads = custom_lister(KUEUE, "v1beta2", "workloads")
    found.append(Kind(WORKLOADS, f"{KUEUE}/v1beta2", "Workload", workloads, True))
    return found


def controller_of(obj: Mapping[str, Any]) -> OwnerRef | None:
    """The ownerReference with ``controller: true``: the object that made this one."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") and ref.get("kind") and ref.get("name"):
            api = str(ref.get("apiVersion") or "")
            return OwnerRef(api, str(ref["kind"]), str(ref["name"]), str(ref.get("uid") or ""))
    return None


def parse_pod(obj: Mapping[str, Any]) -> GangPod | None:
    """The gang a live pod joins; None for a pod that joins none, is finished or is going."""
    meta = obj.get("metadata") or {}
    phase = (obj.get("status") or {}).get("phase")
    if meta.get("deletionTimestamp") or phase in ("Succeeded", "Failed"):
        return None
    namespace = str(meta.get("namespace") or "")
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    marks = ((b.api_version, b.marked(labels, annotations)) for b in GANG_BACKENDS.values())
    found = next(((api, name) for api, name in marks if name), None)
    if found is None:
        return None
    target = Target(found[0], namespace, found[1])
    return GangPod(
        namespace, str(meta.get("name") or ""), str(meta.get("uid") or ""), target, controller_of(obj)
    )


def carries(obj: Any, pod_group: Mapping[str, Any], depth: int = 12) -> bool:
    """Whether the stored object's pods will join this PodGroup: some template's labels (or, for
    Volcano, annotations) name it. A PodGroup nobody joins is never made: a Volcano one would
    hold its ``minResources`` of the queue."""
    name = (pod_group.get("metadata") or {}).get("name")
    backend = by_api_version(str(pod_group.get("apiVersion", "")))
    mark = backend.mark_key if backend is not None else ""
    if depth == 0 or not name:
        return False
    if isinstance(obj, Mapping):
        if obj.get(mark) == name:
            return True
        return any(carries(v, pod_group, depth - 1) for v in obj.values() if isinstance(v, Mapping | list))
    if isinstance(obj, list):
        return any(carries(v, pod_group, depth - 1) for v in obj)
    return False


def names(pod_group: Mapping[str, Any], target: Target) -> bool:
    """Whether this PodGroup (as ``compute`` gives it) is the target."""
    meta = pod_group.get("metadata") or {}
    return pod_group.get("apiVersion") == target.api_version and meta.get("name") == target.name


def _key(obj: Mapping[str, Any]) -> PodKey:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


Parser = Callable[[Mapping[str, Any]], GangPod | None]


class Listed:
    """One kind's list as it arrives, each page reduced at once to what the view keeps."""

    def __init__(self, kind: str, parser: Parser | None = None, group: bool = False) -> None:
        self.kind, self.parser, self.group = kind, parser, group
        self.pods: dict[PodKey, GangPod] = {}
        self.groups: set[PodKey] = set()

    def add(self, items: Iterable[Mapping[str, Any]]) -> None:
        for obj in items:
            if self.parser is not None:
                pod = self.parser(obj)
                if pod is not None:
                    self.pods[_key(obj)] = pod
            elif self.group:
                self.groups.add(_key(obj))


class View:
    """The watch ``Sink``: gang pods by the PodGroup they name, and the PodGroups that exist.
    ``PARSERS`` (pod watch -> how a pod is read) and ``GROUPS`` (PodGroup watch -> apiVersion)
    are what a subclass extends with more kinds (``reconcile_native``)."""

    PARSERS: Mapping[str, Parser] = {kind: parse_pod for kind in POD_KINDS}
    GROUPS: Mapping[str, str] = GROUP_KINDS

    def __init__(self) -> None:
        self.seen: dict[str, dict[PodKey, GangPod]] = {kind: {} for kind in self.PARSERS}  # per watch
        self.pods: dict[PodKey, GangPod] = {}  # what either watch holds
        self.members: dict[Target, set[PodKey]] = {}
        self.groups: dict[str, set[PodKey]] = {api: set() for api in self.GROUPS.values()}
        self.absent: set[str] = set()  # PodGroup apiVersions whose CRD is not served
        self.listed: set[str] = set()  # kinds listed (or known absent) at least once

    # -- what the reconciler overrides --

    def wake(self, target: Target) -> None:
        """A target may be missing now."""

    def early(self, owner: OwnerRef, namespace: str) -> None:
        """Kueue made a Workload for this object: it may need a PodGroup before any pod exists."""

    # -- questions --

    def pod_kinds(self, api_version: str) -> set[str]:
        """The pod watches whose pods may name a PodGroup of this apiVersion."""
        return set(POD_KINDS)

    def missing(self, target: Target) -> bool:
        kind = next(k for k, api in self.GROUPS.items() if api == target.api_version)
        return (
            {*self.pod_kinds(target.api_version), kind} <= self.listed
            and target.api_version not in self.absent
            and bool(self.members.get(target))
            and (target.namespace, target.name) not in self.groups[target.api_version]
        )

    def all_missing(self) -> list[Target]:
        return [t for t in self.members if self.missing(t)]

    def members_of(self, target: Target) -> list[GangPod]:
        return [self.pods[k] for k in sorted(self.members.get(target, ()))]

    def exists(self, api_version: str, namespace: str, name: str) -> bool:
        """Whether the watch shows that PodGroup (False, so POST anyway, when nothing is listed yet)."""
        return (namespace, name) in self.groups.get(api_version, set())

    def created(self, api_version: str, namespace: str, name: str) -> None:
        """Ours now, before the watch says so: a resync in between must not POST it again."""
        self.groups.setdefault(api_version, set()).add((namespace, name))

    # -- the watch Sink --

    def listing(self, kind: str) -> Listed:
        return Listed(kind, self.PARSERS.get(kind), kind in self.GROUPS)

    def commit(self, pages: Listed) -> None:
        if pages.kind in self.PARSERS:
            before, self.seen[pages.kind] = self.seen[pages.kind], pages.pods
            for key in before.keys() | pages.pods.keys():
                self._refresh(key)
        elif pages.kind in self.GROUPS:
            api = self.GROUPS[pages.kind]
            self.groups[api] = pages.groups
            self.absent.discard(api)
        self.listed.add(pages.kind)
        for target in self.all_missing():
            self.wake(target)

    def apply(self, kind: str, event: str, obj: Mapping[str, Any]) -> None:
        if kind in self.PARSERS:
            self._pod(kind, event, obj)
        elif kind in self.GROUPS:
            target = Target(self.GROUPS[kind], *_key(obj))
            names = self.groups[target.api_version]
            if event == "DELETED":
                names.discard((target.namespace, target.name))
                if self.missing(target):
                    self.wake(target)  # deleted under live pods: repair it
            else:
                names.add((target.namespace, target.name))
        elif kind == WORKLOADS and event == "ADDED":
            owner = controller_of(obj)
            if owner is not None:
                self.early(owner, _key(obj)[0])

    def mark_absent(self, kind: str) -> None:
        if kind in self.GROUPS:
            self.absent.add(self.GROUPS[kind])
            self.groups[self.GROUPS[kind]] = set()
        self.listed.add(kind)

    def healthy(self, kind: str) -> None:
        """Freshness is the Mirror's business; the view acts on what it has."""

    def connected(self, kind: str) -> None:
        """As ``healthy``."""

    def disconnected(self, kind: str) -> None:
        """The records stay as they were: the next list replaces them."""

    def _pod(self, kind: str, event: str, obj: Mapping[str, Any]) -> None:
        key = _key(obj)
        pod = None if event == "DELETED" else self.PARSERS[kind](obj)
        if pod is None:
            self.seen[kind].pop(key, None)
        else:
            self.seen[kind][key] = pod
        self._refresh(key)

    def _refresh(self, key: PodKey) -> None:
        """Re-derive one pod's membership from what the pod watches hold of it now."""
        pod = next((seen[key] for seen in self.seen.values() if key in seen), None)
        before = self.pods.pop(key, None)
        if before is not None:
            members = self.members.get(before.target, set())
            members.discard(key)
            if not members:
                self.members.pop(before.target, None)
        if pod is not None:
            self.pods[key] = pod
            self.members.setdefault(pod.target, set()).add(key)
            if self.missing(pod.target):
                self.wake(pod.target)
