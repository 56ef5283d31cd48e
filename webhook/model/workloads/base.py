"""What every workload adapter produces, and the careful readers they share.

An adapter turns one Kubernetes object into the PodSets Kueue would build for it: same names,
same counts, same order. Objects arrive as plain decoded JSON/YAML, so every read is checked and a
bad field becomes an ``InvalidObject`` that names it (``spec.replicatedJobs[1].replicas``) rather
than a ``KeyError`` deep in the scorer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from webhook.model.paths import Path, field_path
from webhook.model.podrequests import stored_pod_requests
from webhook.wire.errors import InvalidObject

# Counts above this are typos or attacks, never a real gang; refusing them early keeps the
# scorer's work bounded and the message clear.
MAX_COUNT = 1_000_000
# Kueue's Workload holds at most this many PodSets (spec.podSets maxItems): a workload with more
# never gets a Workload, so it never runs. Checked before any PodSet is read.
MAX_POD_SETS = 18

RuntimeKey = tuple[str, str, str]
"""(kind, namespace, name) of a TrainingRuntime; namespace is "" for a ClusterTrainingRuntime."""


@dataclass(frozen=True)
class PodSetTemplate:
    """One Kueue PodSet: ``count`` pods built from ``template``.

    ``template_path`` is the JSON path of the pod template (metadata + spec) inside the object,
    ready for a JSON Patch; ``()`` for a Pod, whose template is the Pod itself. ``synthesized``
    marks a template Kueue makes up because the object has none (RayJob's default submitter): the
    path then says where it would go. ``requests`` are per pod, from ``podrequests``.
    ``min_count`` is Kueue's ``PodSet.minCount`` (partial admission: a batch Job's
    ``kueue.x-k8s.io/job-min-parallelism``): Kueue may admit as few pods as that.
    """

    name: str
    count: int
    template_path: Path
    template: Mapping[str, Any]
    requests: Mapping[str, int]
    synthesized: bool = False
    min_count: int | None = None


@dataclass(frozen=True)
class WorkloadPodSets:
    """The PodSets of one workload object, in Kueue's order.

    ``operator_gang`` is "coscheduling" or "volcano" when the job's operator creates PodGroups
    itself (Kubeflow ``runPolicy.schedulingPolicy``, Trainer ``podGroupPolicy``, KubeRay's
    scheduler label), so nobody else must add gang labels. ``groups`` is how many identical
    replica groups Kueue admits one by one (LeaderWorkerSet ``replicas``). ``unresolved`` says why
    the PodSets could not be worked out (a TrainJob whose runtime is unknown); ``pod_sets`` is then
    empty. ``runtime`` is set for a TrainJob: its template paths point into that runtime object.
    """

    api_version: str
    kind: str
    namespace: str
    name: str
    pod_sets: tuple[PodSetTemplate, ...]
    operator_gang: str | None = None
    groups: int = 1
    unresolved: str | None = None
    runtime: RuntimeKey | None = None
    min_parallelism: str | None = None  # a Job's job-min-parallelism annotation, as written

    @property
    def total_pods(self) -> int:
        """Pods across every PodSet and every replica group."""
        return self.groups * sum(ps.count for ps in self.pod_sets)


@dataclass(frozen=True)
class Context:
    """What an adapter may need beyond the object itself."""

    namespace: str = ""
    runtimes: Mapping[RuntimeKey, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))


def lookup(root: Mapping[str, Any], parts: Path, required: bool = True) -> Any:
    """Walk ``parts`` from ``root``; a missing required step is a "Required value" error."""
    node: Any = root
    for depth, part in enumerate(parts):
        container_ok = isinstance(node, list | tuple) if isinstance(part, int) else isinstance(node, Mapping)
        if not container_ok:
            kind = "a list" if isinstance(part, int) else "an object"
            raise InvalidObject.at(field_path(parts[:depth]), f"must be {kind}")
        present = 0 <= part < len(node) if isinstance(part, int) else part in node
        if not present or node[part] is None:
            if required:
                raise InvalidObject.at(field_path(parts[: depth + 1]), "", "Required value")
            return None
        node = node[part]
    return node


def mapping_at(root: Mapping[str, Any], parts: Path, required: bool = True) -> Mapping[str, Any]:
    """Like ``lookup`` but the value must be an object; an absent optional one reads as ``{}``."""
    value = lookup(root, parts, required)
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        raise InvalidObject.at(field_path(parts), "must be an object")
    return value


def list_at(root: Mapping[str, Any], parts: Path, required: bool = True) -> Sequence[Any]:
    """Like ``lookup`` but the value must be a list; an absent optional one reads as ``[]``."""
    value = lookup(root, parts, required)
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise InvalidObject.at(field_path(parts), "must be a list")
    return value


def pod_set_list_at(root: Mapping[str, Any], parts: Path, required: bool = True) -> Sequence[Any]:
    """A list each entry of which becomes a PodSet (replicatedJobs, workerGroupSpecs), bounded."""
    found = list_at(root, parts, required)
    if len(found) > MAX_POD_SETS:
        raise InvalidObject.at(
            field_path(parts),
            f"{len(found)} entries: a Kueue Workload holds at most {MAX_POD_SETS} PodSets, so Kueue "
            "could never admit it",
            "Too many",
        )
    return found


def count_at(root: Mapping[str, Any], parts: Path, default: int) -> int:
    """A replica-like count: a non-negative integer, ``default`` when absent."""
    value = lookup(root, parts, required=False)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidObject.at(field_path(parts), f"{value!r}: must be an integer")
    if value < 0:
        raise InvalidObject.at(field_path(parts), f"{value}: must be greater than or equal to 0")
    return checked_count(value, parts)


def checked_count(count: int, parts: Path) -> int:
    """Refuse absurd pod counts with a message that says why."""
    if count > MAX_COUNT:
        raise InvalidObject.at(
            field_path(parts), f"{count}: a gang of more than {MAX_COUNT} pods is not a plausible workload"
        )
    return count


def pod_set(name: str, count: int, root: Mapping[str, Any], template_path: Path) -> PodSetTemplate:
    """Build a PodSet from the pod template found at ``template_path`` in ``root``."""
    template = mapping_at(root, template_path) if template_path else root
    return pod_set_from(name, count, template, template_path)


def pod_set_from(
    name: str, count: int, template: Mapping[str, Any], template_path: Path, synthesized: bool = False
) -> PodSetTemplate:
    """Build a PodSet from a template already in hand (possibly rewritten, as for TrainJob)."""
    spec_path = field_path((*template_path, "spec"))
    spec = template.get("spec")
    if spec is None:
        raise InvalidObject.at(spec_path, "", "Required value")
    if not isinstance(spec, Mapping):
        raise InvalidObject.at(spec_path, "must be an object")
    requests = stored_pod_requests(spec, spec_path)  # the namespace's defaults come later
    checked_count(count, template_path)
    return PodSetTemplate(name, count, template_path, template, MappingProxyType(requests), synthesized)


def workload(
    obj: Mapping[str, Any], ctx: Context, pod_sets: Sequence[PodSetTemplate], **extra: Any
) -> WorkloadPodSets:
    """Wrap PodSets with the object's identity.

    The name falls back to ``generateName``: mutating webhooks see objects before the API server
    fills in generated names.
    """
    meta = metadata(obj)
    return WorkloadPodSets(
        api_version=str(obj.get("apiVersion", "")),
        kind=str(obj.get("kind", "")),
        namespace=str(meta.get("namespace") or ctx.namespace),
        name=str(meta.get("name") or meta.get("generateName") or ""),
        pod_sets=tuple(pod_sets),
        **extra,
    )


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object's metadata, ``{}`` when absent or malformed (identity is best effort)."""
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else MappingProxyType({})


def string_map(obj: Mapping[str, Any], key: str) -> Mapping[str, str]:
    """``labels`` or ``annotations`` of an object or template, ``{}`` when absent or malformed."""
    value = metadata(obj).get(key)
    return value if isinstance(value, Mapping) else MappingProxyType({})


def job_name(root: Mapping[str, Any], job_path: Path) -> str:
    """A JobSet replicated job's ``name`` (JobSet and TrainJob runtimes both read it)."""
    name = lookup(root, (*job_path, "name"))
    if not isinstance(name, str) or not name:
        raise InvalidObject.at(field_path((*job_path, "name")), f"{name!r}: must be a non-empty string")
    return name
