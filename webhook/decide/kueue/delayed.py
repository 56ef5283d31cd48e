"""The verdict on a flavor whose topology Kueue does not place on today's nodes.

Behind a ProvisioningRequest check Kueue reserves quota, asks for capacity and places the gang on
the nodes provisioned; behind a MultiKueue check it places on a worker cluster
(`state.admission_checks`). Today's nodes then decide nothing: what they hold is said, as a
figure, never as a denial. What no new node changes is still judged before this point (an
unknown level, Kueue's validation, a quota that can never admit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from webhook.decide import messages
from webhook.decide.kueue.mustwait import must_wait
from webhook.decide.kueue.topology import Target
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import PodSetVerdict
from webhook.model.podset import PodSetView
from webhook.state.admission_checks import Delay

REASONS = {
    "provisioning": Reason.PROVISIONING,
    "multikueue": Reason.MULTIKUEUE,
    "missing": Reason.KUEUE_CONFIG,
}


def delayed_reason(delay: Delay) -> Reason:
    return REASONS[delay.kind]


def today_figure(v: PodSetVerdict, level: str, delay: Delay) -> str | None:
    """What today's nodes hold of PodSet ``v`` at ``level``, for a gang Kueue places later or
    elsewhere; None when they hold it now (nothing to say beyond the check itself)."""
    now, never = v.now, v.never
    if now is None or never is None or now.fits:
        return None
    multikueue = delay.kind == "multikueue"
    where = "this cluster's nodes" if multikueue else "today's nodes"
    if not never.fits:
        unit = "pods" if never.unit == "pod" else "slices"
        short = messages.short_level(level)
        placed = "a worker cluster" if multikueue else "the capacity the check brings"
        return (
            f'PodSet "{v.name}": {where} hold {never.fit_count} of {never.total_count} {unit} in one '
            f"{short} even when empty; Kueue places it on {placed}"
        )
    figure = must_wait(v, level)
    return None if figure is None else f'PodSet "{v.name}": on {where}, {figure.phrase}'


def effective_delays(targets: Sequence[Target], pod_sets: Sequence[PodSetView]) -> tuple[Target, ...]:
    """``targets`` with a provisioning delay dropped where Kueue asks for nothing: when the
    ProvisioningRequestConfig names ``managedResources`` and no PodSet uses one, Kueue's check
    turns Ready at once ("no ProvisioningRequest needed", ``reqIsNeeded``) and the gang is placed
    on today's nodes after all."""
    return tuple(
        replace(t, delay=None) if t.delay is not None and not _asks(t.delay, pod_sets) else t for t in targets
    )


def _asks(delay: Delay, pod_sets: Sequence[PodSetView]) -> bool:
    if delay.kind != "provisioning" or delay.config is None or not delay.config.managed:
        return True
    managed = set(delay.config.managed)
    return any(p.count > 0 and _uses(p.pod_set.template, managed) for p in pod_sets)


def _uses(template: Mapping[str, Any], managed: set[str]) -> bool:
    """Kueue's ``podUses``: a container or init container names a managed resource in its
    requests or limits (at any amount)."""
    spec = template.get("spec")
    if not isinstance(spec, Mapping):
        return False
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or ():
            resources = container.get("resources") if isinstance(container, Mapping) else None
            if not isinstance(resources, Mapping):
                continue
            for field in ("requests", "limits"):
                named = resources.get(field)
                if isinstance(named, Mapping) and managed & set(map(str, named)):
                    return True
    return False
