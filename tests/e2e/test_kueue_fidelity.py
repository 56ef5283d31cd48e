"""Proof that tasgate's verdicts equal what a running Kueue v0.19.2 does (e2e/fidelity.py builds the world).

One control plane, the real Kueue manager with its webhooks, and ``tasgate serve --kubeconfig``
registered with both of its production webhook configurations. For every row of the table:

1. the prediction: ``tasgate check -o json`` on a dump of the cluster as it is at that moment
   (``kubectl get nodes,pods,namespaces,priorityclasses -A`` and ``kubectl get topologies,
   resourceflavors,clusterqueues,localqueues,cohorts,workloadpriorityclasses,workloads -A``), the
   documented offline mode;
2. the live webhook must decide the same (a server-side dry run, until its mirror caught up);
3. ``kubectl apply`` through both webhooks, then Kueue decides, polled:

   - tasgate allows and says it fits: Kueue admits it, and for every PodSet Kueue's flavor and
     topology assignment (pods per hostname) equal tasgate's predicted flavor and ``now`` placement;
     Kueue's start UPDATE (unsuspend, node selectors, scheduling gates) is not sent to tasgate;
   - tasgate allows with "waits": the Workload stays pending for a few seconds; the usage pods that
     hold the capacity are deleted (and the gang admitted before it, if any); Kueue admits it where
     a fresh prediction says (made without the gang's own Workload, which Kueue may have admitted);
   - tasgate allows with "admitted-after-preemption": Kueue marks exactly the Workloads tasgate
     named Evicted and Preempted, then admits the gang where tasgate predicted for after;
   - tasgate denies: the refusal carries tasgate's message; the same object created in a namespace
     tasgate's webhooks exclude (``tasgate-system``) stays pending in Kueue with Kueue's own reason.

After the table, no UPDATE that Kueue sent (start, stop) ever reached tasgate (the shipped
matchCondition skips Kueue's user; Kueue runs as its service account) and none was refused, and a
Workload deactivated by hand suspends its Job again without a refusal.

Each row also names the verdict it was designed for, checked last: a row whose world changed (not
tasgate) then fails on that, not silently on something else. Missing binaries FAIL, never skip.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from e2e.controlplane import BinariesMissingError, ControlPlane, find_binaries
from e2e.fidelity import (
    BLOCK,
    BLOCK1_FLAVOR,
    BYPASS_NS,
    CPU_FLAVOR,
    GPU_FLAVOR,
    GROUP_NAME,
    HOST,
    MIN_PARALLELISM,
    MIXED_QUEUE,
    MUTATE,
    NS,
    POD_INDEX_OFFSET,
    PREFERRED,
    QUOTA_QUEUE,
    RACK,
    RACKS_PER_BLOCK,
    REQUIRED,
    RESOURCES,
    SLICE_CONSTRAINTS,
    SLICE_REQUIRED,
    SLICE_SIZE,
    UNCONSTRAINED,
    WORKLOADS,
    Fidelity,
    KueueOutcome,
    TasgateServer,
    fidelity_world,
    in_namespace,
    job,
    jobset,
    leader_worker_set,
    live_summary,
    mpi_job,
    mutating_webhooks_called,
    pod_template,
    predicted_podsets,
    pytorch_job,
    replicated_job,
    same_object,
    tasgate_annotations,
    tasgate_called,
    tasgate_denial,
)
from e2e.kueue import Kueue, find_kueue
from e2e.kueue_admission import condition_true, wait_for

pytestmark = pytest.mark.e2e
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
PREEMPTED_MARK = "admitted after preemption: "


@dataclass(frozen=True)
class Row:
    """One case: the object, what it was designed to get from tasgate, and what Kueue must do with it.

    ``allowed`` and ``reasons``: tasgate's verdict the design expects (``reasons`` None: any reason),
    checked after the comparison with Kueue, which is driven by tasgate's actual prediction.
    ``usage``: node -> GPUs held by bound Pods during the case.
    ``kueue_message``: for a refused row, a text Kueue's pending message must contain.
    ``tasgate_text_in_kueue``: a refused row's Kueue message must also contain tasgate's own
    rendition of Kueue's TAS message (its PodSet ``now.message``, without the node counts).
    ``counts``: Kueue's admitted count per PodSet when it differs from the spec (partial admission);
    such a row is never held back as "waits": Kueue admits what fits now.
    ``flavors``: the flavor Kueue must pick per PodSet, as a check of the row's design.
    ``offset_at``: path to a template Kueue marks with ``pod-index-offset: "1"``.
    ``group_at``: paths to templates stored with tasgate's leader-and-workers group name and
    without Kueue's offset (the policy groups them: issue 37.6).
    ``before``: a gang Kueue admits just before the case (no kube-controller-manager here: it has
    no pods, only its TopologyAssignment holds capacity, as right after any admission).
    ``warning``: a text one of tasgate's warnings must contain (the row's design: "fits by borrowing").
    ``pending``: a "waits" Kueue keeps pending for good (a cohort that will not lend): its message
    must contain ``kueue_message``, and nothing is freed.
    For a "waits" on quota in use, Kueue's pending message must contain the Kueue text tasgate
    quotes, and ``kueue_message`` when given.
    """

    obj: dict[str, Any]
    allowed: bool
    reasons: frozenset[str] | None
    usage: Mapping[str, int] = field(default_factory=dict)
    kueue_message: str = ""
    tasgate_text_in_kueue: bool = False
    counts: Mapping[str, int] | None = None
    flavors: Mapping[str, str] | None = None
    offset_at: tuple[str, ...] = ()
    group_at: tuple[tuple[str, ...], ...] = ()
    before: dict[str, Any] | None = None
    warning: str = ""
    pending: bool = False


def fits(obj: dict[str, Any], **kw: Any) -> Row:
    return Row(obj, True, frozenset({"fits"}), **kw)


def denied(
    obj: dict[str, Any], kueue_message: str, reasons: frozenset[str] = frozenset({"never-fits"}), **kw: Any
) -> Row:
    return Row(obj, False, reasons, kueue_message=kueue_message, **kw)


RACK_REQUIRED = {REQUIRED: RACK}
LAYERS = json.dumps([{"topology": RACK, "size": 8}, {"topology": HOST, "size": 2}])
ONE_PER_RACK = {f"b{b}-r{r}-h0": 8 for b in range(2) for r in range(RACKS_PER_BLOCK)}
BLOCK0_ONE_PER_RACK = {f"b0-r{r}-h0": 8 for r in range(RACKS_PER_BLOCK)}


def prioritized(obj: dict[str, Any], priority_class: str = "fidelity-high") -> dict[str, Any]:
    """``obj`` with Kueue's WorkloadPriorityClass label."""
    obj["metadata"].setdefault("labels", {})[PRIORITY_CLASS_LABEL] = priority_class
    return obj


ROWS: dict[str, Row] = {
    # Kueue counts an admitted gang's assignment at once, pods or not: a second gang that needs
    # the block the first was just given waits (block 1 is one host short), until the first goes.
    "gang-waits-for-the-gang-admitted-before-it": Row(
        job("gang-waits-for-the-gang-admitted-before-it", 16, {REQUIRED: BLOCK}),
        True,
        frozenset({"waits"}),
        usage={"b1-r0-h0": 8},
        before=job("gang-admitted-first", 16, {REQUIRED: BLOCK}),
    ),
    # ... and one that fits beside it goes to another rack than the one the first was given.
    "gang-placed-beside-the-gang-admitted-before-it": fits(
        job("gang-placed-beside-the-gang-admitted-before-it", 4, RACK_REQUIRED),
        before=job("rack-gang-admitted-first", 4, RACK_REQUIRED),
    ),
    "job-required-rack": fits(job("job-required-rack", 4, RACK_REQUIRED)),
    "job-required-block": fits(job("job-required-block", 10, {REQUIRED: BLOCK})),
    "job-preferred-rack-spills": fits(job("job-preferred-rack-spills", 6, {PREFERRED: RACK})),
    "job-unconstrained": fits(job("job-unconstrained", 5, {UNCONSTRAINED: "true"})),
    # The default policy injects podset-required-topology at the tightest level that can hold 3.
    "job-unannotated-gang-gets-a-level": fits(job("job-unannotated-gang-gets-a-level", 3)),
    # Unannotated on a TAS-only queue, one pod (the policy injects nothing): Kueue's implied TAS,
    # unconstrained at the lowest level, least free capacity (in pods that fit) first: b1-r3-h2
    # holds 2 more such pods, b0-r1-h1 3, every other host 4.
    "job-implied-tas-one-pod": fits(
        job("job-implied-tas-one-pod", 1, gpus=2), usage={"b1-r3-h2": 4, "b0-r1-h1": 2}
    ),
    "job-implied-tas-cpu-gang": fits(job("job-implied-tas-cpu-gang", 3, gpus=0, cpu="40")),
    "jobset-two-replicated-jobs-rack": fits(
        jobset(
            "jobset-two-replicated-jobs-rack",
            [
                replicated_job("a", 1, 2, pod_template(RACK_REQUIRED)),
                replicated_job("b", 1, 3, pod_template(RACK_REQUIRED)),
            ],
        )
    ),
    "jobset-slices": fits(
        jobset(
            "jobset-slices",
            [
                replicated_job(
                    "workers",
                    6,
                    2,
                    pod_template({REQUIRED: BLOCK, SLICE_REQUIRED: RACK, SLICE_SIZE: "2"}),
                )
            ],
        )
    ),
    "jobset-multi-layer-slices": fits(
        jobset(
            "jobset-multi-layer-slices",
            [
                replicated_job(
                    "workers", 2, 8, pod_template({REQUIRED: BLOCK, SLICE_CONSTRAINTS: LAYERS}, gpus=4)
                )
            ],
        )
    ),
    "pytorchjob-master-worker-rack": fits(pytorch_job("pytorchjob-master-worker-rack", 3, RACK_REQUIRED)),
    "mpijob-launcher-as-worker": fits(
        mpi_job("mpijob-launcher-as-worker", 3, RACK_REQUIRED),
        offset_at=("spec", "mpiReplicaSpecs", "Worker", "template"),
    ),
    "lws-leader-size-4": fits(
        leader_worker_set("lws-leader-size-4", 4, RACK_REQUIRED),
        offset_at=("spec", "leaderWorkerTemplate", "workerTemplate"),
    ),
    # --- issue 37.6: the default policy places a leader with its workers ---
    # Kueue's webhook writes pod-index-offset on the workers (no group yet); tasgate's group name
    # replaces it, and Kueue places leader and workers together, where tasgate predicted.
    "lws-unannotated-leader-with-workers": fits(
        leader_worker_set("lws-unannotated-leader-with-workers", 4, {}),
        group_at=(
            ("spec", "leaderWorkerTemplate", "leaderTemplate"),
            ("spec", "leaderWorkerTemplate", "workerTemplate"),
        ),
    ),
    # A Master and Workers each requiring a rack are placed on their own: told, and Kueue agrees.
    "pytorchjob-master-worker-apart": fits(
        pytorch_job("pytorchjob-master-worker-apart", 4, RACK_REQUIRED), warning="placed apart"
    ),
    "jobset-leader-workers-group": fits(
        jobset(
            "jobset-leader-workers-group",
            [
                replicated_job("leader", 1, 1, pod_template({REQUIRED: RACK, GROUP_NAME: "lw"})),
                replicated_job("workers", 1, 3, pod_template({REQUIRED: RACK, GROUP_NAME: "lw"})),
            ],
        )
    ),
    # b0-r0 has 3 free hosts (the tightest that fits), b0-r1 2, b1-r2 3.5: Kueue's best fit moves.
    "job-partly-used-cluster": fits(
        job("job-partly-used-cluster", 3, RACK_REQUIRED),
        usage={"b0-r0-h0": 8, "b0-r1-h0": 8, "b0-r1-h1": 8, "b1-r2-h3": 4},
    ),
    # Every rack has 3 free hosts: a rack-required 4-gang fits the empty cluster, not this one.
    "job-waits-for-capacity": Row(
        job("job-waits-for-capacity", 4, RACK_REQUIRED), True, frozenset({"waits"}), usage=ONE_PER_RACK
    ),
    "job-never-fits-a-rack": denied(
        job("job-never-fits-a-rack", 5, RACK_REQUIRED),
        "allows to fit only 4 out of 5 pod(s)",
        tasgate_text_in_kueue=True,
    ),
    "job-never-fits-a-host": denied(
        job("job-never-fits-a-host", 1, gpus=16),
        "doesn't allow to fit any of 1 pod(s)",
        tasgate_text_in_kueue=True,
    ),
    # Mixed queue (gpu-flavor is TAS, cpu-flavor is not): an unannotated PodSet cannot use the TAS
    # flavor, so Kueue puts it on cpu-flavor, quota only, although no GPU node holds 120 CPUs.
    "mixed-queue-unannotated-cpu-job": Row(
        job("mixed-queue-unannotated-cpu-job", 1, gpus=0, cpu="120", queue=MIXED_QUEUE),
        True,
        frozenset({"fits", "no-tas"}),
        flavors={"main": CPU_FLAVOR},
    ),
    "mixed-queue-annotated-job": fits(
        job("mixed-queue-annotated-job", 2, RACK_REQUIRED, queue=MIXED_QUEUE), flavors={"main": GPU_FLAVOR}
    ),
    # 40 pods never fit a block (16 hosts); Kueue admits the 16 that fit (job-min-parallelism 8), and
    # tasgate's placement of them must be Kueue's.
    "partial-admission-block": Row(
        job("partial-admission-block", 40, {REQUIRED: BLOCK}, job_annotations={MIN_PARALLELISM: "8"}),
        True,
        None,
        counts={"main": 16},
        flavors={"main": GPU_FLAVOR},
    ),
    # quota-cq holds 16 GPUs and has no cohort: a 32-GPU gang is never admitted.
    "quota-exceeded": denied(
        job("quota-exceeded", 4, RACK_REQUIRED, queue=QUOTA_QUEUE),
        "insufficient quota for nvidia.com/gpu in flavor gpu-flavor",
        reasons=frozenset({"over-quota"}),
    ),
    # --- issue 18: quota as Kueue counts it ---
    # tight-cq holds 24 GPUs; the gang before it takes 16: 16 more are 8 more than the 8 unused.
    "tight-queue-filled-then-asked-again": Row(
        job("tight-queue-filled-then-asked-again", 2, RACK_REQUIRED, queue="tight-queue"),
        True,
        frozenset({"waits"}),
        before=job("tight-queue-first", 2, RACK_REQUIRED, queue="tight-queue"),
        kueue_message="insufficient unused quota for nvidia.com/gpu in flavor gpu-flavor, 8 more needed",
    ),
    # borrow-cq holds 8 GPUs; lender-cq lends its 24 in the Cohort lending-cohort: 16 fit by borrowing.
    "cohort-lends": fits(
        job("cohort-lends", 2, RACK_REQUIRED, queue="borrow-queue"),
        warning='fits by borrowing from cohort "lending-cohort"',
    ),
    # stingy-lender-cq lends at most 4 of its 24 (lendingLimit): stingy-cq can take 8 + 4 = 12.
    "cohort-lending-limit-stops-it": Row(
        job("cohort-lending-limit-stops-it", 2, RACK_REQUIRED, queue="stingy-queue"),
        True,
        frozenset({"waits"}),
        pending=True,
        kueue_message="> maximum capacity (12)",
    ),
    # two-flavor-cq: block0-flavor then block1-flavor. Block 0 has 3 free hosts per rack now, so Kueue's
    # placement fails there and its next scheduling cycle goes on to block1-flavor.
    "two-flavors-only-the-second-fits-now": fits(
        job("two-flavors-only-the-second-fits-now", 4, RACK_REQUIRED, queue="two-flavor-queue"),
        usage=BLOCK0_ONE_PER_RACK,
        flavors={"main": BLOCK1_FLAVOR},
    ),
    # preempt-cq (16 GPUs, withinClusterQueue: LowerPriority) is full with a fidelity-low gang: a
    # fidelity-high one is admitted once Kueue has evicted it (issue 18.3), where the low one was.
    "high-priority-gang-preempts-a-low-priority-one": Row(
        prioritized(
            job("high-priority-gang-preempts-a-low-priority-one", 2, RACK_REQUIRED, queue="preempt-queue")
        ),
        True,
        frozenset({"admitted-after-preemption"}),
        before=prioritized(
            job("low-priority-gang-preempted", 2, RACK_REQUIRED, queue="preempt-queue"), "fidelity-low"
        ),
    ),
    # no-preempt-cq is the same under withinClusterQueue: Never: the high one waits for the quota.
    "high-priority-gang-waits-when-preemption-is-never": Row(
        prioritized(
            job(
                "high-priority-gang-waits-when-preemption-is-never",
                2,
                RACK_REQUIRED,
                queue="no-preempt-queue",
            )
        ),
        True,
        frozenset({"waits"}),
        before=prioritized(
            job("low-priority-gang-kept", 2, RACK_REQUIRED, queue="no-preempt-queue"), "fidelity-low"
        ),
        kueue_message="insufficient unused quota for nvidia.com/gpu in flavor gpu-flavor, 16 more needed",
    ),
    # partial-cq holds 31 GPUs: 8 pods x 4 GPUs do not fit, Kueue's search settles on 7 (28 GPUs).
    "partial-admission-limited-by-quota": Row(
        job(
            "partial-admission-limited-by-quota",
            8,
            RACK_REQUIRED,
            gpus=4,
            queue="partial-queue",
            job_annotations={MIN_PARALLELISM: "7"},
        ),
        True,
        frozenset({"fits"}),
        counts={"main": 7},
    ),
    # The nodes have ephemeral-storage, tas-cq does not cover it (Kueue's BlockUndeclared default).
    "resource-not-in-cluster-queue": denied(
        job("resource-not-in-cluster-queue", 2, RACK_REQUIRED, extra={"ephemeral-storage": "10Gi"}),
        "resource ephemeral-storage unavailable in ClusterQueue",
        reasons=frozenset({"over-quota"}),
    ),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fidelity]:
    try:
        binaries, kueue_binary = find_binaries(), find_kueue()
    except BinariesMissingError as exc:
        pytest.fail(str(exc), pytrace=False)
    workdir = tmp_path_factory.mktemp("fidelity")
    with (
        ControlPlane(binaries=binaries) as cp,
        Kueue(cp, binary=kueue_binary, log_level=3) as kueue,
        fidelity_world(workdir, cp, kueue) as fidelity,
    ):
        yield fidelity


# --- comparing -------------------------------------------------------------------------------------


def kueue_podsets(outcomes: list[KueueOutcome]) -> dict[str, tuple[str | None, dict[str, int]]]:
    (outcome,) = outcomes  # one Workload per row (an LWS of one replica group too)
    return {name: (flavor, dict(hosts)) for name, (flavor, _, hosts) in outcome.podsets.items()}


def describe(verdict: Mapping[str, Any]) -> str:
    notes = "; ".join(
        f"{p['name']}: flavor={p.get('flavor')} now.fits={(p.get('now') or {}).get('fits')} "
        f"now.message={(p.get('now') or {}).get('message')!r}"
        for p in verdict.get("podSets") or ()
    )
    return (
        f"allowed={verdict['allowed']} reason={verdict['reason']} message={verdict.get('message')!r} "
        f"warnings={verdict.get('warnings')} [{notes}]"
    )


def compare(row: Row, verdict: Mapping[str, Any], outcomes: list[KueueOutcome]) -> None:
    """Kueue's flavor and pods per host per PodSet equal tasgate's prediction (or the row's counts)."""
    (outcome,) = outcomes
    counts = {name: count for name, (_, count, _) in outcome.podsets.items()}
    if row.counts is not None:
        assert counts == dict(row.counts), f"Kueue admitted {counts}, expected {dict(row.counts)}"
    actual = kueue_podsets(outcomes)
    if row.flavors is not None:
        assert {n: f for n, (f, _) in actual.items()} == dict(row.flavors), f"Kueue chose {actual}"
    unplaced = all(not p.get("now") for p in verdict.get("podSets") or ())  # listed, not placed
    if row.counts is None and verdict["reason"] == "no-tas" and unplaced:
        # tasgate judged no placement: Kueue must not have made one either.
        assert all(not hosts for _, hosts in actual.values()), (
            f"tasgate said no TAS ({describe(verdict)}), Kueue assigned a topology: {actual}"
        )
    else:
        predicted = predicted_podsets(verdict)
        assert predicted == actual, (
            f"tasgate predicted {predicted}, Kueue admitted {actual}; tasgate said: {describe(verdict)}"
        )


def quoted_kueue_texts(verdict: Mapping[str, Any]) -> list[str]:
    """Kueue's reasons that tasgate quotes in a waits-for-quota warning (``(Kueue: "…")``)."""
    marker = 'Kueue: "'
    quoted = [w.split(marker, 1)[1].rsplit('"', 1)[0] for w in verdict.get("warnings") or () if marker in w]
    return [reason for text in quoted for reason in re.split(r", (?=insufficient )", text)]


def tasgate_denials_of(world: Fidelity, obj: Mapping[str, Any]) -> list[str]:
    return [
        f"{e.get('verb')} by {e.get('userAgent')}: {message}"
        for e in world.audit.all()
        if same_object(e, obj) and (message := tasgate_denial(e))
    ]


def wait_started(world: Fidelity, obj: Mapping[str, Any]) -> None:
    """Kueue's start UPDATE got through (tasgate's webhooks skip it): the workload is unsuspended."""
    if world.suspended(obj) is None:
        return
    try:
        wait_for(f"Kueue to unsuspend {obj['metadata']['name']}", lambda: world.suspended(obj) is False, 30)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; tasgate's refusals of it: {tasgate_denials_of(world, obj)}") from None


def annotations_at(stored: Mapping[str, Any], path: tuple[str, ...]) -> dict[str, str]:
    node: Any = stored
    for part in path:
        node = node[part]
    return dict((node.get("metadata") or {}).get("annotations") or {})


# --- the table -------------------------------------------------------------------------------------


def allowed_case(
    world: Fidelity,
    row: Row,
    verdict: Mapping[str, Any],
    result: subprocess.CompletedProcess[str],
    pods: list[str],
) -> None:
    """tasgate let it in: Kueue admits it where tasgate said (after the usage pods go, for "waits")."""
    assert result.returncode == 0, f"tasgate check allowed it, the API server refused: {result.stderr}"
    for warning in verdict.get("warnings") or ():
        assert warning in result.stderr, f"warning {warning!r} missing from kubectl's {result.stderr!r}"
    if row.offset_at:
        stored = json.loads(result.stdout)
        assert annotations_at(stored, row.offset_at).get(POD_INDEX_OFFSET) == "1", stored
    for path in row.group_at:
        notes = annotations_at(json.loads(result.stdout), path)
        assert notes.get(GROUP_NAME) == "tasgate-leader-workers" and POD_INDEX_OFFSET not in notes, notes
    obj = row.obj
    if row.warning:
        assert any(row.warning in w for w in verdict.get("warnings") or ()), describe(verdict)
    if verdict["reason"] == "admitted-after-preemption":
        preempted_case(world, row, verdict)
        return
    if verdict["reason"] == "waits" and row.counts is None:
        try:
            (pending,) = world.stays_pending(obj)
        except AssertionError as exc:
            raise AssertionError(f"tasgate predicted 'waits' ({describe(verdict)}): {exc}") from None
        for text in [row.kueue_message, *quoted_kueue_texts(verdict)]:
            assert text in pending.message, (text, pending.message)
        if row.pending:
            return
        world.remove_usage(pods)
        pods.clear()
        if row.before is not None:
            world.delete(row.before)
        verdict = check_as_if_pending(world, obj)  # the cluster as it is now: where Kueue will put it
    try:
        outcomes = world.wait_outcome(obj, admitted=True)
    except AssertionError as exc:
        raise AssertionError(f"tasgate allowed it ({describe(verdict)}) but {exc}") from None
    compare(row, verdict, outcomes)
    wait_started(world, obj)


def denied_case(
    world: Fidelity, row: Row, verdict: Mapping[str, Any], result: subprocess.CompletedProcess[str]
) -> None:
    """tasgate refused it with its message; without tasgate, Kueue keeps it pending, for its own reason."""
    assert result.returncode != 0, f"tasgate check denied it ({describe(verdict)}), the API server stored it"
    assert f'admission webhook "{MUTATE}" denied the request' in result.stderr, result.stderr
    assert verdict["message"] in result.stderr, (verdict["message"], result.stderr)
    bypass = in_namespace(row.obj, BYPASS_NS)
    created = world.apply(bypass)
    assert created.returncode == 0, created.stderr
    try:
        (pending,) = world.stays_pending(bypass)
    except AssertionError as exc:
        raise AssertionError(f"tasgate denied it ({describe(verdict)}) but {exc}") from None
    assert row.kueue_message in pending.message, pending
    if row.tasgate_text_in_kueue:
        texts = [
            str(p["now"]["message"]).split(". Total nodes")[0]
            for p in verdict["podSets"]
            if (p.get("now") or {}).get("message")
        ]
        assert texts, f"tasgate gave no PodSet message: {describe(verdict)}"
        assert all(text in pending.message for text in texts), (texts, pending.message)


@pytest.mark.parametrize("row", list(ROWS.values()), ids=list(ROWS))
def test_tasgate_verdict_equals_kueue(world: Fidelity, row: Row) -> None:
    assert world.no_workloads_left(), "a previous case left Workloads behind"
    obj = row.obj
    pods = world.add_usage(row.usage)
    leftovers = [obj, in_namespace(obj, BYPASS_NS), *([row.before] if row.before else [])]
    try:
        if row.before is not None:
            admit_first(world, row.before)
        verdict = world.check(obj)
        world.sync_live(obj, verdict)
        result = world.apply(obj)
        event = world.create_event(obj)
        live = tasgate_annotations(event) if event else {}
        offline = verdict.get("auditAnnotations") or {}
        assert live_summary(live) == live_summary(offline), (
            f"live tasgate decided {live} on create, offline check {describe(verdict)}"
        )
        assert event is not None
        called = mutating_webhooks_called(event)
        kueue_hooks = [i for i, name in enumerate(called) if name.endswith(".kb.io")]
        assert kueue_hooks and min(kueue_hooks) < called.index(MUTATE), (
            f"Kueue's mutating webhook must run before tasgate's: {called}"
        )
        if verdict["allowed"]:
            allowed_case(world, row, verdict, result, pods)
        else:
            denied_case(world, row, verdict, result)
        designed = f"allowed={row.allowed} reason in {sorted(row.reasons or ['any'])}"
        assert verdict["allowed"] is row.allowed, (
            f"the row was designed for {designed}; tasgate: {describe(verdict)}"
        )
        assert row.reasons is None or verdict["reason"] in row.reasons, (
            f"the row was designed for {designed}; tasgate said {describe(verdict)}"
        )
    except BaseException:
        world.cleanup(leftovers, pods, strict=False)
        raise
    world.cleanup(leftovers, pods, strict=True)


def check_as_if_pending(world: Fidelity, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The prediction on the cluster now, without ``obj``'s own Workloads: Kueue may have admitted
    it already (it was freed), and a dump that counts its own assignment predicts around it."""
    dump = world.dump()
    path = dump / "kueue.yaml"
    listed = yaml.safe_load(path.read_text())
    kind, name = obj["kind"], obj["metadata"]["name"]

    def own(item: Mapping[str, Any]) -> bool:
        owners = (item.get("metadata") or {}).get("ownerReferences") or ()
        return item.get("kind") == "Workload" and any(
            o.get("kind") == kind and o.get("name") == name for o in owners
        )

    listed["items"] = [i for i in listed.get("items") or () if not own(i)]
    path.write_text(yaml.safe_dump(listed))
    return world.check(obj, dump)


def preempted_case(world: Fidelity, row: Row, verdict: Mapping[str, Any]) -> None:
    """Kueue evicts exactly the Workloads tasgate named (their Evicted and Preempted conditions),
    then admits the gang with the flavor and pods per host tasgate predicted for after."""
    (note,) = [w for w in verdict.get("warnings") or () if w.startswith(PREEMPTED_MARK)]
    named = set(note.split('": ', 1)[1].split(", "))
    assert row.before is not None, "a preemption row names the gang Kueue evicts (before)"
    namespace = row.before["metadata"]["namespace"]

    def preempted() -> set[str]:
        return {
            f"{namespace}/{w['metadata']['name']}"
            for w in world.workloads(row.before or {})
            if condition_true(w, "Preempted") and condition_true(w, "Evicted")
        }

    wait_for("Kueue to preempt the low-priority gang", lambda: bool(preempted()), 30)
    assert preempted() == named, f"Kueue preempted {preempted()}, tasgate named {named}"
    outcomes = world.wait_outcome(row.obj, admitted=True)
    compare(row, verdict, outcomes)
    wait_started(world, row.obj)


def admit_first(world: Fidelity, obj: dict[str, Any]) -> None:
    """Create ``obj`` and wait until Kueue admitted it (its assignment then holds capacity)."""
    created = world.apply(obj)
    assert created.returncode == 0, created.stderr
    world.wait_outcome(obj, admitted=True)


# --- Kueue's own UPDATEs ---------------------------------------------------------------------------


def test_deactivated_workload_suspends_its_job_again(world: Fidelity) -> None:
    """Kueue's stop UPDATE (suspend, restored template) and a second start pass, tasgate not called."""
    obj = job("deactivate-me", 2, RACK_REQUIRED)
    try:
        assert world.apply(obj).returncode == 0
        (workload,) = world.wait_outcome(obj, admitted=True)
        wait_started(world, obj)

        def set_active(active: bool) -> None:
            patch = json.dumps({"spec": {"active": active}})
            world.cp.kubectl("patch", WORKLOADS, workload.name, "-n", NS, "--type=merge", "-p", patch)

        set_active(False)
        try:
            wait_for("Kueue to suspend the Job again", lambda: world.suspended(obj) is True, 30)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; tasgate's refusals: {tasgate_denials_of(world, obj)}") from None
        assert not any(o.admitted for o in world.outcomes(obj))
        set_active(True)
        world.wait_outcome(obj, admitted=True)
        wait_started(world, obj)
        assert tasgate_denials_of(world, obj) == []
        kueue_writes = [
            e
            for e in world.audit.all()
            if same_object(e, obj)
            and e.get("verb") in ("update", "patch")
            and str(e.get("userAgent", "")).startswith("kueue/")
        ]
        assert len(kueue_writes) >= 3, "start, stop and start again: Kueue wrote the Job at least 3 times"
        assert not any(tasgate_called(e) for e in kueue_writes), "the matchCondition skips Kueue's writes"
        assert {e["user"]["username"] for e in kueue_writes} == {world.kueue.identity.username}
    finally:
        world.delete(obj)


def test_live_state_stays_fresh_while_its_watches_are_healthy(world: Fidelity) -> None:
    """A second ``tasgate serve --stale-after 5`` on the same healthy API server stays ready.

    The fidelity world runs tasgate with ``--stale-after 0``: a live state that went stale would
    answer "unavailable" (allow with a warning), and the live verdict would differ from the check's
    for reasons that have nothing to do with Kueue. This pins that down on its own.
    """
    server = TasgateServer(world.cp, world.workdir / "stale-after-5", stale_after=5)
    try:
        wait_for("the second tasgate to sync", server.ready, 60, every=0.3)
        synced = time.monotonic()
        while time.monotonic() - synced < 15:
            assert server.ready(), (
                f"/readyz turned false {time.monotonic() - synced:.1f}s after the first sync, API server up; "
                f"log tail:\n{server.log()[-1500:]}"
            )
            time.sleep(0.5)
    finally:
        server.stop()


def test_no_update_from_kueue_was_refused_by_tasgate(world: Fidelity) -> None:
    """Last: over the whole run, tasgate refused no UPDATE of a workload (Kueue's or anyone's), and
    none of Kueue's reached it: the shipped matchCondition skips Kueue's user by name."""
    workload_resources = {RESOURCES[kind].partition(".")[0] for kind in RESOURCES}
    updates = [
        e
        for e in world.audit.all()
        if e.get("verb") in ("update", "patch")
        and (e.get("objectRef") or {}).get("resource") in workload_resources
        and not (e.get("objectRef") or {}).get("subresource")
    ]
    from_kueue = [e for e in updates if str(e.get("userAgent", "")).startswith("kueue/")]
    assert from_kueue, f"no UPDATE of a workload from Kueue ({len(updates)} in all)"
    assert {e["user"]["username"] for e in from_kueue} == {world.kueue.identity.username}
    judged = [
        f"{e['objectRef'].get('resource')}/{e['objectRef'].get('name')}"
        for e in from_kueue
        if tasgate_called(e)
    ]
    assert judged == [], f"{len(judged)} of Kueue's {len(from_kueue)} UPDATEs reached tasgate: {judged}"
    refused = [
        f"{e['objectRef'].get('resource')}/{e['objectRef'].get('name')} {e['verb']} by {e.get('userAgent')}: "
        f"{tasgate_denial(e)}"
        for e in updates
        if tasgate_denial(e)
    ]
    assert refused == [], "\n".join(refused)
    own = [
        f"{line.get('endpoint')} {line.get('kind')} {line.get('namespace')}/{line.get('name')}: "
        f"{line.get('reason')}: {line.get('message')}"
        for line in world.tasgate.audit()
        if line.get("operation") == "UPDATE" and line.get("allowed") is False
    ]
    assert own == [], "tasgate's own audit log shows refused UPDATEs:\n" + "\n".join(own)
