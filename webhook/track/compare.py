"""tasgate's prediction against what Kueue did: its correctness measured on the user's own cluster.

When Kueue admits a Workload, its flavor and TopologyAssignment per PodSet are compared with the
``now`` placement tasgate computed on the cluster state of that moment. The outcome is a value:
``agree`` or ``disagree`` with one bounded reason code (the first difference found, in PodSet
order), and a sentence with every difference for the Event. The fidelity suite (e2e/fidelity.py)
holds tasgate to the same comparison offline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from webhook.track.admission import PodSetAdmission
from webhook.track.predict import Assessment, PodSetFigure

# Every reason code ``tasgate_predictions_total`` may carry (a bounded label set).
REASONS = ("none", "podset", "flavor", "fit", "count", "domain")


@dataclass(frozen=True)
class Comparison:
    agree: bool
    reason: str  # one of REASONS
    detail: str

    @property
    def result(self) -> str:
        return "agree" if self.agree else "disagree"


def compare(admission: Mapping[str, PodSetAdmission], predicted: Assessment) -> Comparison | None:
    """None when tasgate made no prediction (the workload is not placed by TAS, or not judged)."""
    if not predicted.judged:
        return None
    found = [d for p in predicted.pod_sets if (d := _difference(p, admission.get(p.name))) is not None]
    if not found:
        return Comparison(True, "none", "Kueue placed every PodSet where tasgate predicted")
    return Comparison(False, found[0][0], "; ".join(text for _, text in found))


def _difference(p: PodSetFigure, kueue: PodSetAdmission | None) -> tuple[str, str] | None:
    if kueue is None:
        return "podset", f'PodSet "{p.name}" is not in Kueue\'s admission'
    flavors = set(kueue.flavors.values())
    if p.flavor and flavors and flavors != {p.flavor}:
        return "flavor", f'PodSet "{p.name}": Kueue chose flavor {_names(flavors)}, tasgate {p.flavor}'
    if not p.fits_now:
        return "fit", f'PodSet "{p.name}": Kueue admitted it, tasgate found no room now ({p.waits})'
    predicted = sum(p.hosts.values())
    if predicted != kueue.count:
        return "count", f'PodSet "{p.name}": Kueue admitted {kueue.count} pods, tasgate placed {predicted}'
    hosts = kueue.pods_at(kueue.levels[-1]) if kueue.domains else {}
    if hosts != dict(p.hosts):
        return (
            "domain",
            f'PodSet "{p.name}": Kueue placed {_placement(hosts)}, tasgate predicted {_placement(p.hosts)}',
        )
    return None


def _names(flavors: set[str]) -> str:
    return ",".join(sorted(flavors))


def _placement(hosts: Mapping[str, int]) -> str:
    return " ".join(f"{h}×{c}" for h, c in sorted(hosts.items())) or "no topology assignment"
