"""The admission policy a platform team writes: what to inject, for whom, with which gang.

A versioned YAML document (`apiVersion: tasgate.io/v1alpha1`, `kind: AdmissionPolicy`).
Rules match by namespace (names or a label selector), queue, total pods and total GPUs;
the first match wins. Every field is checked when the file is loaded (`decide.policy_text`),
so a typo fails the start-up (or `tasgate check`), not an admission request at 3 a.m.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from webhook.decide.gangs import GANG_BACKENDS

API_VERSION = "tasgate.io/v1alpha1"
KIND = "AdmissionPolicy"
DEFAULT_GPU_RESOURCES = (
    "nvidia.com/gpu",
    "amd.com/gpu",
    "gpu.intel.com/i915",
    "habana.ai/gaudi",
    "google.com/tpu",
)
# Kueue's identity (its Deployment's service account): its start and stop writes are Kueue's
# to make; anyone else who unsuspends a queued workload is judged.
KUEUE_USERS = ("system:serviceaccount:kueue-system:kueue-controller-manager",)
MODES = ("required", "preferred", "none")
BACKENDS = (*GANG_BACKENDS, "native", "none")  # the gang backends (`decide.gangs`), native, none
TIGHTEST = "tightest"
PARTIAL_START_AFTER = 300.0  # seconds some pods may run while the rest stay Pending (lifecycle)
MAX_GANG_SHAPES = 16  # each shape is one placement per flavor per state generation


class PolicyError(Exception):
    """The policy file is unusable; the message names the field."""


@dataclass(frozen=True)
class LabelSelector:
    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        for key, op, values in self.match_expressions:
            have = labels.get(key)
            ok = {
                "In": have is not None and have in values,
                "NotIn": have is None or have not in values,
                "Exists": have is not None,
                "DoesNotExist": have is None,
            }[op]
            if not ok:
                return False
        return True


@dataclass(frozen=True)
class Subject:
    """What a rule is matched against: where the workload is and how big it is."""

    namespace: str
    ns_labels: Mapping[str, str]
    queue: str | None
    pods: int
    gpus: int
    gpus_per_pod: int = 0  # the most any one pod asks for


@dataclass(frozen=True)
class Match:
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    queues: tuple[str, ...] = ()
    min_pods: int = 0
    max_pods: int | None = None
    min_gpus: int = 0
    max_gpus: int | None = None
    min_gpus_per_pod: int = 0

    def matches(self, s: Subject) -> bool:
        if self.namespaces and s.namespace not in self.namespaces:
            return False
        if self.namespace_selector is not None and not self.namespace_selector.matches(s.ns_labels):
            return False
        if self.queues and (s.queue or "") not in self.queues:
            return False
        if s.pods < self.min_pods or (self.max_pods is not None and s.pods > self.max_pods):
            return False
        if s.gpus_per_pod < self.min_gpus_per_pod:
            return False
        return s.gpus >= self.min_gpus and (self.max_gpus is None or s.gpus <= self.max_gpus)


@dataclass(frozen=True)
class Inject:
    mode: str = "none"  # required | preferred | none
    level: str = TIGHTEST  # a level's node label, or "tightest"
    loosest_level: str | None = None
    group_leader_workers: bool = False


@dataclass(frozen=True)
class Gang:
    backend: str = "none"  # coscheduling | volcano | native | none
    schedule_timeout_seconds: int | None = None


@dataclass(frozen=True)
class Rule:
    name: str
    match: Match
    inject: Inject
    gang: Gang


@dataclass(frozen=True)
class GangShape:
    """A gang size operators plan capacity in (``pods`` x ``gpus_per_pod``): the fragmentation
    figures say how many of these fit now, per level and flavor."""

    pods: int
    gpus_per_pod: int

    @property
    def text(self) -> str:
        return f"{self.pods}x{self.gpus_per_pod}"


DEFAULT_GANG_SHAPES = (GangShape(8, 8), GangShape(32, 8))


@dataclass(frozen=True)
class DefaultTopology:
    name: str = ""
    levels: tuple[str, ...] = ()


@dataclass(frozen=True)
class Policy:
    name: str
    rules: tuple[Rule, ...] = ()
    exempt_namespaces: tuple[str, ...] = ()
    default_topology: DefaultTopology | None = None
    gpu_resources: tuple[str, ...] = DEFAULT_GPU_RESOURCES
    kueue_users: tuple[str, ...] = KUEUE_USERS
    partial_start_after: float = PARTIAL_START_AFTER  # spec.partialStartAfter, in seconds
    gang_shapes: tuple[GangShape, ...] = DEFAULT_GANG_SHAPES

    def rule_for(self, subject: Subject) -> Rule | None:
        """The first rule that matches."""
        return next((r for r in self.rules if r.match.matches(subject)), None)


NONE_POLICY = Policy(name="none")
