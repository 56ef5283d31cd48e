"""What each placement gate, flipped, does to Kueue v0.19.2's own TAS code, and that tasgate follows.

The answers are Kueue's: kueue-gates (e2e/tools/kueue_gates, built into ~/.cache/tasgate by its
build.sh, which reuses bench/kueue_peer's private module copy) is the peer of
tests/e2e/test_kueue_peer.py with ``--feature-gates`` applied to Kueue's gate set, so the same
nodes, usage and PodSets go through Kueue's TAS cache, snapshot and
``FindTopologyAssignmentsForFlavor`` with the gate flipped. tasgate places the same inputs as its
verdicts do under those gates (`decide.kueue.gate_guard`). The inputs are seeded GPU clusters of 8-300
nodes, each with three single-group workloads (test_kueue_peer's gangs: required, preferred,
unconstrained, implied, sliced, leader+workers) and three two-PodSet workloads whose first PodSet
is preferred, each placed on the cluster as it is and on the empty one: 3,000 workloads a gate.

- ``TASProfileMixed=false`` (reproduced): every outcome equal, assignment for assignment and
  failure message for failure message, while hundreds differ from Kueue's default profile.
- ``TASBalancedPlacement=true`` (guarded): a workload without a preferred-topology PodSet gets
  Kueue's default answer exactly; a preferred PodSet fits exactly when Kueue's default says it
  does (its domains may differ: tasgate says so); and a PodSet after one may fit where tasgate's
  default says never, which is why such a PodSet is never denied: every such case is covered.
- ``TASRespectNodeAffinityPreferred=true`` (guarded): without a preferred node affinity (the peer
  cannot give one) Kueue's answer is the default gates', every outcome equal.

A missing Go toolchain or module is a failure, never a skip.
"""

from __future__ import annotations

import json
import random
import subprocess
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bench import kueue_peer
from scorer import Cluster, _reference
from scorer.model import HOSTNAME_LABEL, Mode, PodSetRequest, TopologyRequest
from tests.e2e.test_kueue_peer import GPU, LEVELS, Case, Flavor, documents, gang, gpu_cluster
from webhook.decide.kueue.gate_guard import guard_start, placed_request
from webhook.state.kueue_gates import PlacementGates

pytestmark = pytest.mark.e2e

BUILD = Path(__file__).resolve().parents[2] / "e2e" / "tools" / "kueue_gates" / "build.sh"
SEED = (
    20261207  # the seeded clusters; with it, balanced placement admits one workload tasgate's default denies
)


@pytest.fixture(scope="module")
def binary() -> Path:
    """kueue-gates, built or taken from the cache; a failed build fails the tests with its output."""
    done = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, check=False, timeout=1200)
    if done.returncode != 0:
        pytest.fail(f"{BUILD} failed ({done.returncode}):\n{done.stderr[-3000:]}", pytrace=False)
    return Path(done.stdout.strip().splitlines()[-1])


def two_podsets(rng: random.Random) -> tuple[PodSetRequest, PodSetRequest]:
    """A preferred-topology PodSet, then one required, preferred or unconstrained."""
    first = PodSetRequest(
        "first",
        rng.randint(1, 40),
        {GPU: rng.choice([1, 2, 4, 8]), "cpu": 4000},
        TopologyRequest(Mode.PREFERRED, rng.choice(LEVELS)),
    )
    mode = rng.choice([Mode.REQUIRED, Mode.PREFERRED, Mode.UNCONSTRAINED])
    level = None if mode is Mode.UNCONSTRAINED else rng.choice(["block", "rack", HOSTNAME_LABEL])
    then = PodSetRequest(
        "then", rng.randint(1, 40), {GPU: rng.choice([1, 2, 4, 8]), "cpu": 4000}, TopologyRequest(mode, level)
    )
    return first, then


def cases() -> list[Case]:
    rng = random.Random(SEED)
    out = []
    for _ in range(250):
        workloads: dict[str, tuple[PodSetRequest, ...]] = {f"g{w}": gang(rng) for w in range(3)}
        workloads.update({f"t{w}": two_podsets(rng) for w in range(3)})
        out.append(Case(LEVELS, tuple(gpu_cluster(rng)), workloads, Flavor({}, ())))
    return out


CASES = cases()


def kueue_answers(binary: Path, flag: str) -> Iterator[dict[str, Any]]:
    """Kueue's answers with ``--feature-gates=flag``, one per document of every case, in order."""
    docs = [d for case in CASES for d in documents(case)]
    stdin = "".join(json.dumps(d, separators=(",", ":")) + "\n" for d in docs)
    done = subprocess.run(
        [str(binary), f"--feature-gates={flag}"], input=stdin, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert len(answers) == len(docs)
    return iter(answers)


Pair = tuple[Sequence[PodSetRequest], list[kueue_peer.Outcome], list[kueue_peer.Outcome]]


def pairs(binary: Path, flag: str, gates: PlacementGates, engine: Any = None) -> Iterator[Pair]:
    """(PodSets, tasgate's outcomes under ``gates``, Kueue's under ``flag``) of every workload;
    ``engine``: the scorer's pure-Python twin instead of the compiled engine."""
    answers = kueue_answers(binary, flag)
    for case in CASES:
        cluster = Cluster.build("default", case.levels, case.nodes, {}, (), 0, engine)
        for view in (cluster.now, cluster.never):
            answer = next(answers)
            for w, pod_sets in enumerate(case.workloads.values()):
                requests = [replace(p, topology=placed_request(p.topology, gates)) for p in pod_sets]
                ours = kueue_peer.tasgate_outcomes(view.place(requests))
                yield pod_sets, ours, kueue_peer.kueue_outcomes(answer["workloads"][w], pod_sets)


def test_profile_mixed_off_is_reproduced(binary: Path) -> None:
    off = PlacementGates(profile_mixed=False)
    seen: Counter[str] = Counter()
    found = []
    for _, ours, theirs in pairs(binary, "TASProfileMixed=false", off):
        found += kueue_peer.differences(ours, theirs)
        seen.update(o.kind for o in theirs)
    assert not found, "\n".join(found[:10])
    twin = [
        d
        for _, o, t in pairs(binary, "TASProfileMixed=false", off, _reference)
        for d in kueue_peer.differences(o, t)
    ]
    assert not twin, "the scorer's pure-Python twin: " + "\n".join(twin[:10])
    default = [
        kueue_peer.differences(o, t) for _, o, t in pairs(binary, "TASProfileMixed=false", PlacementGates())
    ]
    changed = sum(bool(d) for d in default)
    assert changed >= 500 and seen["fit"] >= 1000 and seen["no-fit"] >= 300, (changed, seen)


def test_balanced_placement_never_denies_what_kueue_admits(binary: Path) -> None:
    on = PlacementGates(balanced=True)
    seen: Counter[str] = Counter()
    for pod_sets, ours, theirs in pairs(binary, "TASBalancedPlacement=true", on):
        start = guard_start([(p.name, p.topology, False) for p in pod_sets], on)
        if not any(p.topology.mode is Mode.PREFERRED for p in pod_sets):
            assert not kueue_peer.differences(ours, theirs), pod_sets  # nothing balanced: exact
            continue
        first = len(pod_sets) if start is None else start[0]
        for mine, kueues in zip(ours[:first], theirs, strict=False):  # before the guard: same fit
            assert mine.kind == kueues.kind or "anomaly" in (mine.kind, kueues.kind), (pod_sets, mine, kueues)
        seen["preferred placed elsewhere"] += bool(kueue_peer.differences(ours, theirs))
        if _admitted(theirs, pod_sets) and not _admitted(ours, pod_sets):
            seen["kueue admits, tasgate's default denies"] += 1
            assert start is not None and all(o.kind != "no-fit" for o in ours[: start[0]]), pod_sets
    assert (
        seen["preferred placed elsewhere"] >= 500 and seen["kueue admits, tasgate's default denies"] >= 1
    ), seen


def _admitted(outcomes: Sequence[kueue_peer.Outcome], pod_sets: Sequence[PodSetRequest]) -> bool:
    return len(outcomes) == len(pod_sets) and all(o.kind != "no-fit" for o in outcomes)


def test_affinity_preferred_without_a_preferred_affinity_is_the_default(binary: Path) -> None:
    on = PlacementGates(affinity_preferred=True)
    found, count = [], 0
    for pod_sets, ours, theirs in pairs(binary, "TASRespectNodeAffinityPreferred=true", on):
        assert guard_start([(p.name, p.topology, False) for p in pod_sets], on) is None
        found += kueue_peer.differences(ours, theirs)
        count += 1
    assert not found and count == 3000, "\n".join(found[:10])
