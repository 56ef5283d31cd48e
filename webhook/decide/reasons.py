"""Why a review ended as it did: one closed set of reason codes, each with its meaning.

The codes are what the audit log, the API server's audit annotations, metrics and
``tasgate check -o json`` carry; the table in docs/reasons.md is generated from ``MEANING`` (a test keeps
the two in step).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType


class Reason(StrEnum):
    FITS = "fits"
    WAITS = "waits"
    ADMITTED_AFTER_PREEMPTION = "admitted-after-preemption"
    PROVISIONING = "provisioning"
    MULTIKUEUE = "multikueue"
    NEVER_FITS = "never-fits"
    PARTIAL_SLICE = "partial-slice"
    OVER_QUOTA = "over-quota"
    INVALID = "invalid"
    MUTATION_MISSING = "mutation-missing"
    UNCHANGED = "unchanged"
    NOT_SUSPENDED = "not-suspended"
    SKIPPED_OPERATION = "skipped-operation"
    EXEMPT = "exempt"
    OWNED = "owned"
    NO_TAS = "no-tas"
    KUEUE_CONFIG = "kueue-config"
    OBJECT_REJECTED = "object-rejected"
    UNRESOLVED = "unresolved"
    UNKNOWN_KIND = "unknown-kind"
    NATIVE_UNKNOWN = "native-unknown"
    NOT_A_WORKLOAD = "not-a-workload"
    UNAVAILABLE = "unavailable"
    INTERNAL_ERROR = "internal-error"


MEANING: Mapping[Reason, str] = MappingProxyType(
    {
        Reason.FITS: "allowed: every PodSet fits the current free capacity",
        Reason.WAITS: "allowed with a warning: fits the empty cluster, not the free capacity now",
        Reason.ADMITTED_AFTER_PREEMPTION: (
            "allowed with a warning: Kueue admits it by preempting lower-priority Workloads "
            "(the warning names them); it does not fit the free capacity now"
        ),
        Reason.PROVISIONING: (
            "allowed with a warning: its flavor is behind a ProvisioningRequest admission check; "
            "Kueue reserves quota, waits for provisioned nodes and places the gang on them, so "
            "today's nodes are a figure, never a denial"
        ),
        Reason.MULTIKUEUE: (
            "allowed with a warning: its ClusterQueue dispatches to worker clusters (MultiKueue); "
            "Kueue assigns the topology on the worker, so this cluster's nodes are never a denial"
        ),
        Reason.NEVER_FITS: "denied: some PodSet cannot be placed even on the empty cluster",
        Reason.PARTIAL_SLICE: (
            "denied: a gang whose slice size does not divide its pod count; Kueue places whole "
            "slices only, and the gang's pods left over never start, so none does"
        ),
        Reason.OVER_QUOTA: "denied: its ClusterQueue lacks a resource, or can never give that much",
        Reason.INVALID: "denied: a TAS annotation, gang label or template field is invalid",
        Reason.MUTATION_MISSING: (
            "allowed with a warning (validate): the mutation tasgate asks for is not on the object "
            "(the mutating webhook not reached, or another state judged it); judged as written, as "
            "Kueue will run it, and refused only for what refuses it as written"
        ),
        Reason.UNCHANGED: "allowed: an UPDATE that changes nothing placement depends on",
        Reason.NOT_SUSPENDED: "allowed: an UPDATE of an admitted or running workload (Kueue's start/stop)",
        Reason.SKIPPED_OPERATION: "allowed: DELETE, CONNECT or a subresource",
        Reason.EXEMPT: "allowed: the namespace is exempt by policy",
        Reason.OWNED: "allowed: a child of a workload kind tasgate judges (judged with its parent)",
        Reason.NO_TAS: (
            "allowed: no TAS flavor and no policy default topology applies (the message says which "
            "is missing: `check` reads it as not checked)"
        ),
        Reason.KUEUE_CONFIG: "allowed with a warning: the queue's Kueue objects are missing or broken",
        Reason.OBJECT_REJECTED: (
            "per --on-timeout: an object its verdict depends on (queue, flavor, topology, namespace, "
            "LimitRange, runtime) is left out of the state as unusable; the warning names it"
        ),
        Reason.UNRESOLVED: "allowed with a warning: the PodSets could not be worked out (TrainJob runtime)",
        Reason.UNKNOWN_KIND: "allowed with a warning: looks like a workload of a kind tasgate does not read",
        Reason.NATIVE_UNKNOWN: (
            "allowed with a warning: a native pod group (scheduling.k8s.io/v1alpha2) whose pods' "
            "requests are not known: no Job or pod that joins it is in the state"
        ),
        Reason.NOT_A_WORKLOAD: "allowed: not a workload",
        Reason.UNAVAILABLE: "per --on-timeout: no fresh state, or the decision overran its budget",
        Reason.INTERNAL_ERROR: "per --on-timeout: tasgate failed to decide (a bug); see its log",
    }
)


def reason_table() -> str:
    """The table of reason codes in docs/reasons.md, from ``MEANING``."""
    rows = [f"| `{reason.value}` | {MEANING[reason]} |" for reason in Reason]
    return "\n".join(["| reason | meaning |", "|---|---|", *rows])
