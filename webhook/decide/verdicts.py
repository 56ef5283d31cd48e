"""What a decision says: the plain result types the webhook, the CLI and the audit log read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from scorer.model import Placement, TopologyRequest
from webhook.decide.reasons import Reason
from webhook.state.rejected import Rejected


@dataclass(frozen=True)
class Review:
    """The plain input of one decision. ``old_obj`` is set for an UPDATE."""

    obj: Mapping[str, Any]
    namespace: str = ""
    operation: str = "CREATE"
    uid: str = ""
    dry_run: bool = False
    old_obj: Mapping[str, Any] | None = None
    user: str = ""  # who asked (the AdmissionRequest's userInfo.username)


@dataclass(frozen=True)
class PodSetVerdict:
    """One PodSet's fate. ``judged`` is False for a PodSet Kueue places without TAS (no TAS
    annotation in a queue that mixes TAS and other flavors): it has no placements.

    Under partial admission (a minimum count), ``admitted`` is the count Kueue admits now and
    ``admissible`` the most it could ever admit, when the full count does not fit; ``now`` and
    ``never`` are then the placements at those counts.
    """

    name: str
    count: int
    requests: Mapping[str, int]
    request: TopologyRequest
    injected: bool
    flavor: str | None = None
    now: Placement | None = None
    never: Placement | None = None
    judged: bool = True
    min_count: int | None = None
    admitted: int | None = None
    admissible: int | None = None
    # Kueue's reason when the topology fits now but the quota free now does not (`decide.kueue.flavors`).
    quota: str = ""
    # The native backend's figures (kube-scheduler PodGroup cycle): every domain's scores.
    native: Mapping[str, Any] | None = None

    @property
    def fits_now(self) -> bool:
        return self.now is not None and self.now.fits and not self.quota

    @property
    def fits_when_empty(self) -> bool:
        return self.never is not None and self.never.fits


def all_fit_now(verdicts: Sequence[PodSetVerdict]) -> bool:
    return all(v.fits_now for v in verdicts if v.judged)


def all_fit_when_empty(verdicts: Sequence[PodSetVerdict]) -> bool:
    return all(v.fits_when_empty for v in verdicts if v.judged)


@dataclass(frozen=True)
class FlavorVerdict:
    """How the workload fares on one TAS flavor of its ClusterQueue ("" = policy default)."""

    flavor: str
    topology: str
    fits_now: bool
    fits_when_empty: bool


@dataclass(frozen=True)
class Decision:
    api_version: str
    kind: str
    namespace: str
    name: str
    allowed: bool
    reason: Reason
    message: str = ""
    warnings: tuple[str, ...] = ()
    patch: tuple[dict[str, Any], ...] = ()
    audit: Mapping[str, str] = field(default_factory=dict)
    pod_groups: tuple[dict[str, Any], ...] = ()
    pod_sets: tuple[PodSetVerdict, ...] = ()
    topology: str | None = None
    flavors: tuple[FlavorVerdict, ...] = ()
    queue: str | None = None
    cluster_queue: str | None = None
    generation: int = 0
    # The left-out object this verdict depends on (reason object-rejected): not judged.
    rejected: Rejected | None = None


_DECISION_FIELDS = frozenset(f.name for f in fields(Decision))


def revised(decision: Decision, **changes: Any) -> Decision:
    """``dataclasses.replace`` for a `Decision`, without re-running ``__init__`` over its 18
    fields (6 us a call, three or more a review: the decision is built up by replacements). It
    has no ``__post_init__`` and no derived field, so a copy of its attributes with ``changes``
    is the object ``replace`` would make; an unknown field is refused as ``replace`` does."""
    unknown = changes.keys() - _DECISION_FIELDS
    if unknown:
        raise TypeError(f"Decision has no field {', '.join(sorted(unknown))}")
    new = object.__new__(Decision)
    new.__dict__.update(decision.__dict__, **changes)
    return new


def first_decision(review: Review, generation: int) -> Decision:
    """What every verdict starts from: the object's identity (a name or generateName), allowed,
    reason not-a-workload, until a backend says more."""
    obj = review.obj
    raw_meta = obj.get("metadata")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
    return Decision(
        api_version=str(obj.get("apiVersion", "")),
        kind=str(obj.get("kind", "")),
        namespace=str(meta.get("namespace") or review.namespace),
        name=str(meta.get("name") or meta.get("generateName") or ""),
        allowed=True,
        reason=Reason.NOT_A_WORKLOAD,
        generation=generation,
    )


def deny(base: Decision, reason: Reason, message: str) -> Decision:
    return revised(base, allowed=False, reason=reason, message=message, audit=verdict_audit(False, reason))


def with_reason(base: Decision, reason: Reason, warnings: tuple[str, ...] = ()) -> Decision:
    warnings = (*base.warnings, *warnings)
    return revised(base, reason=reason, warnings=warnings, audit=verdict_audit(True, reason))


def verdict_audit(allowed: bool, reason: Reason) -> dict[str, str]:
    """``decision`` is allow/deny everywhere (audit line, annotations, JSON); ``reason`` the code."""
    return {"decision": "allow" if allowed else "deny", "reason": reason.value}
