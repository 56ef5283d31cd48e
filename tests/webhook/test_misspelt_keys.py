"""Unknown and misspelt Kueue/tasgate keys (issue 19.1): named in a warning with the key meant,
in the decision, the CLI and the admission response, and never injected over."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestClient

from tests.webhook.conftest import (
    BLOCK,
    MANIFESTS,
    PREFERRED,
    REQUIRED,
    apply_patch,
    job,
    judge,
    manifest,
    pod_set,
    tasgate,
)
from tests.webhook.test_server import ClientFactory, Harness, post, review
from webhook.decide.patch import added_keys
from webhook.decide.policy import Policy
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision
from webhook.model import annotations as ann
from webhook.model import keys
from webhook.model.workloads import extract
from webhook.rules import key_warnings
from webhook.rules.keynames import KNOWN, distance, examine, limit
from webhook.state.cluster import ClusterState

Client = TestClient[web.Request, web.Application]
TYPO = "kueue.x-k8s.io/podset-prefered-topology"
TOPOLOGY_PATCH = (REQUIRED, PREFERRED)

# (what kind of slip, the key as written, the key meant): one row per kind of typo.
MISSPELLINGS = [
    ("missing letter", "kueue.x-k8s.io/podset-prefered-topology", PREFERRED),
    ("swapped letters", "kueue.x-k8s.io/podset-requried-topology", REQUIRED),
    ("missing letter at the end of a word", "kueue.x-k8s.io/podset-required-topolgy", REQUIRED),
    ("extra letter", "kueue.x-k8s.io/podset-requireed-topology", REQUIRED),
    ("tripled letter", "kueue.x-k8s.io/podset-preferrred-topology", PREFERRED),
    ("wrong letter", "kueue.x-k8s.io/podset-requited-topology", REQUIRED),
    ("two slips", "kueue.x-k8s.io/podset-prefered-toplogy", PREFERRED),
    ("underscores", "kueue.x-k8s.io/podset_required_topology", REQUIRED),
    ("camelCase", "kueue.x-k8s.io/podSetPreferredTopology", PREFERRED),
    ("upper case", "kueue.x-k8s.io/PODSET-REQUIRED-TOPOLOGY", REQUIRED),
    ("missing hyphen", "kueue.x-k8s.io/podsetrequired-topology", REQUIRED),
    ("extra hyphen", "kueue.x-k8s.io/pod-set-preferred-topology", PREFERRED),
    ("dots for hyphens", "kueue.x-k8s.io/podset.required.topology", REQUIRED),
    ("plural", "kueue.x-k8s.io/podset-required-topologies", REQUIRED),
    (
        "singular",
        "kueue.x-k8s.io/podset-slice-required-topology-constraint",
        ann.PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS,
    ),
    ("without podset-", "kueue.x-k8s.io/preferred-topology", PREFERRED),
    ("words swapped", "kueue.x-k8s.io/podset-topology-required", REQUIRED),
    ("word missing", "kueue.x-k8s.io/podset-slice-topology", ann.PODSET_SLICE_REQUIRED_TOPOLOGY),
    ("word extra", "kueue.x-k8s.io/podset-required-topology-level", REQUIRED),
    ("word replaced", "kueue.x-k8s.io/podset-preferred-level", PREFERRED),
    ("truncated", "kueue.x-k8s.io/podset-unconstrained", ann.PODSET_UNCONSTRAINED_TOPOLOGY),
    (
        "wrong word form",
        "kueue.x-k8s.io/podset-unconstraint-topology",
        ann.PODSET_UNCONSTRAINED_TOPOLOGY,
    ),
    ("slice size plural", "kueue.x-k8s.io/podset-slice-sizes", ann.PODSET_SLICE_SIZE),
    ("slice size glued", "kueue.x-k8s.io/podset-slicesize", ann.PODSET_SLICE_SIZE),
    ("slice typo", "kueue.x-k8s.io/podset-slice-required-topolgy", ann.PODSET_SLICE_REQUIRED_TOPOLOGY),
    ("group name typo", "kueue.x-k8s.io/podset-group-nane", ann.PODSET_GROUP_NAME),
    ("group name cut", "kueue.x-k8s.io/podset-group", ann.PODSET_GROUP_NAME),
    ("queue name underscore", "kueue.x-k8s.io/queue_name", ann.QUEUE_NAME_LABEL),
    ("queue name glued", "kueue.x-k8s.io/queuename", ann.QUEUE_NAME_LABEL),
    ("queue name cut", "kueue.x-k8s.io/queue", ann.QUEUE_NAME_LABEL),
    ("queue name swapped letters", "kueue.x-k8s.io/queue-nmae", ann.QUEUE_NAME_LABEL),
    ("priority class glued", "kueue.x-k8s.io/priorityclass", keys.PRIORITY_CLASS_LABEL),
    ("priority class extra word", "kueue.x-k8s.io/priority-classname", keys.PRIORITY_CLASS_LABEL),
    ("min parallelism typo", "kueue.x-k8s.io/job-min-paralellism", ann.JOB_MIN_PARALLELISM_ANNOTATION),
    ("pod group name glued", "kueue.x-k8s.io/podgroup-name", ann.POD_GROUP_NAME_LABEL),
    ("total count cut", "kueue.x-k8s.io/pod-group-total", ann.POD_GROUP_TOTAL_COUNT_ANNOTATION),
    ("offset typo", "kueue.x-k8s.io/pod-index-ofset", ann.POD_INDEX_OFFSET),
    (
        "max exec time longer word",
        "kueue.x-k8s.io/max-execution-time-seconds",
        keys.MAX_EXEC_TIME_SECONDS_LABEL,
    ),
    ("prebuilt typo", "kueue.x-k8s.io/prebuild-workload-name", keys.PREBUILT_WORKLOAD_NAME),
    ("retriable spelt retryable", "kueue.x-k8s.io/retryable-in-group", keys.RETRIABLE_IN_GROUP),
    ("fast admission typo", "kueue.x-k8s.io/pod-group-fast-admision", keys.POD_GROUP_FAST_ADMISSION),
    ("a key Kueue writes", "kueue.x-k8s.io/job-uuid", keys.JOB_UID_LABEL),
    ("double slash", "kueue.x-k8s.io//podset-required-topology", REQUIRED),
    # wrong prefixes
    ("prefix without x-", "kueue.k8s.io/podset-required-topology", REQUIRED),
    ("prefix in capitals", "Kueue.x-k8s.io/queue-name", ann.QUEUE_NAME_LABEL),
    ("prefix letters swapped", "kueue.x-k8s.oi/queue-name", ann.QUEUE_NAME_LABEL),
    ("prefix letter missing", "kueue.x-k8.io/podset-preferred-topology", PREFERRED),
    ("prefix of another domain", "kueue.sigs.k8s.io/queue-name", ann.QUEUE_NAME_LABEL),
    ("prefix .com", "kueue.x-k8s.com/queue-name", ann.QUEUE_NAME_LABEL),
    ("prefix cut to its first label", "kueue/podset-required-topology", REQUIRED),
    ("prefix without kueue.", "x-k8s.io/queue-name", ann.QUEUE_NAME_LABEL),
    ("prefix k for q", "queue.x-k8s.io/queue-name", ann.QUEUE_NAME_LABEL),
    ("prefix and name both slipped", "kueue.k8s.io/podset-prefered-topology", PREFERRED),
    ("dot for slash", "kueue.x-k8s.io.queue-name", ann.QUEUE_NAME_LABEL),
    ("backslash for slash", "kueue.x-k8s.io\\podset-required-topology", REQUIRED),
    ("no prefix", "podset-preferred-topology", PREFERRED),
    ("no prefix and a typo", "podset-required-topolgy", REQUIRED),
    ("no prefix on the queue label", "queue-name", ann.QUEUE_NAME_LABEL),
    ("another project's prefix", "scheduling.x-k8s.io/podset-required-topology", REQUIRED),
    ("the node topology prefix", "topology.kubernetes.io/podset-preferred-topology", PREFERRED),
    # tasgate's own
    ("tasgate missing letter", "tasgate.io/injct", ann.INJECT_OPT_OUT),
    ("tasgate capital", "tasgate.io/Inject", ann.INJECT_OPT_OUT),
    ("tasgate longer word", "tasgate.io/injection", ann.INJECT_OPT_OUT),
    ("tasgate .com", "tasgate.com/inject", ann.INJECT_OPT_OUT),
    ("tasgate without .io", "tasgate/inject", ann.INJECT_OPT_OUT),
    ("tasgate plural domain", "tasgates.io/inject", ann.INJECT_OPT_OUT),
    ("Kueue key under tasgate's prefix", "tasgate.io/podset-required-topology", REQUIRED),
    ("tasgate key under Kueue's prefix", "kueue.x-k8s.io/inject", ann.INJECT_OPT_OUT),
]

# Keys that must never warn: Kueue's (as people and Kueue write them), tasgate's, other projects'.
OTHER_PROJECTS = """
    provreq.kueue.x-k8s.io/maxRunDurationSeconds app team queue priority workload managed podset job-name
    controller-uid group-name slice-size app.kubernetes.io/name batch.kubernetes.io/job-name
    batch.kubernetes.io/controller-uid batch.kubernetes.io/job-completion-index
    jobset.sigs.k8s.io/jobset-name jobset.sigs.k8s.io/replicatedjob-name
    alpha.jobset.sigs.k8s.io/exclusive-topology leaderworkerset.sigs.k8s.io/exclusive-topology
    leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology scheduling.x-k8s.io/pod-group
    pod-group.scheduling.sigs.k8s.io pod-group.scheduling.sigs.k8s.io/min-available
    scheduling.k8s.io/group-name scheduling.volcano.sh/queue-name scheduling.volcano.sh/group-min-member
    volcano.sh/queue-name volcano.sh/network-topology training.kubeflow.org/job-name
    training.kubeflow.org/replica-type ray.io/node-type ray.io/scheduler-name kai.scheduler/queue
    kai.scheduler/topology-required-placement cluster-autoscaler.kubernetes.io/safe-to-evict
    kubectl.kubernetes.io/last-applied-configuration kubectl.kubernetes.io/default-container
    topology.kubernetes.io/zone cloud.provider.com/topology-block cloud.google.com/gke-tpu-topology
    karpenter.sh/do-not-disrupt sidecar.istio.io/inject linkerd.io/inject prometheus.io/scrape
    nvidia.com/gpu.product faults.tasgate.io/marker
"""
QUIET = [*sorted(KNOWN), *OTHER_PROJECTS.split()]

# Under Kueue's or tasgate's exact prefix, unknown and like nothing: named, nothing suggested.
UNKNOWN = ["kueue.x-k8s.io/team", "kueue.x-k8s.io/cost-center", "tasgate.io/owner"]


@pytest.mark.parametrize(("kind", "key", "meant"), MISSPELLINGS, ids=[m[0] for m in MISSPELLINGS])
def test_each_kind_of_misspelling_names_the_key_meant(kind: str, key: str, meant: str) -> None:
    finding = examine(key)
    assert finding is not None, kind
    assert finding.suggestion == meant


def test_the_misspelling_list_is_long_and_covers_every_kind() -> None:
    assert len(MISSPELLINGS) >= 40
    assert len({kind for kind, _, _ in MISSPELLINGS}) == len(MISSPELLINGS)
    assert not {key for _, key, _ in MISSPELLINGS} & set(QUIET)


@pytest.mark.parametrize("key", QUIET)
def test_known_and_other_projects_keys_stay_quiet(key: str) -> None:
    assert examine(key) is None


@pytest.mark.parametrize("key", UNKNOWN)
def test_an_unknown_key_under_an_own_prefix_is_named_without_a_guess(key: str) -> None:
    finding = examine(key)
    assert finding is not None and finding.own and finding.suggestion is None


def test_distance_counts_a_swap_as_one_edit_and_gives_up_past_the_limit() -> None:
    assert distance("required", "requried", 1) == 1  # a transposition, not two substitutions
    assert distance("queuename", "queuenmae", 1) == 1
    assert distance("abc", "xyz", 2) is None
    assert distance("podset", "podset", 0) == 0
    assert (limit(6), limit(9), limit(23)) == (1, 2, 3)
    assert (limit(6, strict=True), limit(23, strict=True)) == (1, 2)


def test_the_known_key_list_is_kueues() -> None:
    """Every key is under its prefix; the people-written and Kueue-written lists do not overlap."""
    assert not keys.KUEUE_USER_KEYS & keys.KUEUE_WRITTEN_KEYS
    assert all(k.startswith(ann.KUEUE_PREFIX) for k in keys.KUEUE_KEYS)
    assert set(ann.TAS_ANNOTATIONS) <= keys.KUEUE_USER_KEYS
    assert {"tasgate.io/inject"} == keys.TASGATE_KEYS
    written_by_kueue = {
        "podset",
        "workload",
        "managed",
        "job-uid",
        "cluster-queue-name",
        "pod-group-pod-index",
    }
    assert {f"kueue.x-k8s.io/{name}" for name in written_by_kueue} <= keys.KUEUE_WRITTEN_KEYS
    assert len(keys.KUEUE_KEYS) == 47  # v0.19.2's label and annotation constants, less test-only ones


# --- the issue's example, through the decision ----------------------------------------------------


def topology_patch(d: Decision) -> set[str]:
    return {k for op in d.patch for k in added_keys(op)} & set(TOPOLOGY_PATCH)


def test_the_issue_example_is_warned_and_not_injected_over(
    sample_state: ClusterState, default_policy: Policy
) -> None:
    """12 × 8 GPUs: preferred block fits now; the policy's required block would wait. Misspelt,
    Kueue sees no TAS request and places the PodSet as implied (unannotated) TAS: that is the
    verdict, with the warning naming the key meant; the policy no longer writes its own."""
    right = judge(job(12, annotations={PREFERRED: BLOCK}), sample_state, default_policy)
    assert right.reason is Reason.FITS and pod_set(right, "main").request.mode.value == "preferred"
    wrong = judge(job(12, annotations={TYPO: BLOCK}), sample_state, default_policy)
    assert wrong.reason is Reason.FITS
    v = pod_set(wrong, "main")
    assert (v.request.mode.value, v.injected) == ("implied", False)
    assert not topology_patch(wrong)
    assert wrong.warnings[0] == (
        f'PodSet "main": unknown annotation "{TYPO}"; did you mean "{PREFERRED}"? Kueue v0.19.2 ignores it'
    )
    assert (
        wrong.warnings[1]
        == f'PodSet "main": no topology annotation added over "{TYPO}", a misspelt or misplaced TAS key'
    )
    before = judge(job(12), sample_state, default_policy)  # unannotated: the policy does inject
    assert topology_patch(before) == {REQUIRED} and before.reason is Reason.WAITS


@pytest.mark.parametrize(
    "annotations",
    [{"kueue.x-k8s.io/podset-requried-topology": BLOCK}, {"podset-required-topology": BLOCK}],
)
def test_no_policy_injection_over_any_near_miss(
    sample_state: ClusterState, default_policy: Policy, annotations: dict[str, str]
) -> None:
    d = judge(job(12, annotations=annotations), sample_state, default_policy)
    assert not topology_patch(d)
    assert any("did you mean" in w and REQUIRED in w for w in d.warnings)
    assert any("no topology annotation added" in w for w in d.warnings)


def test_a_topology_key_written_as_a_label_is_said_and_not_injected_over(
    sample_state: ClusterState, default_policy: Policy
) -> None:
    d = judge(job(12, labels={REQUIRED: "block"}), sample_state, default_policy)
    assert not topology_patch(d)
    assert d.warnings[0] == (
        f'PodSet "main": label "{REQUIRED}" has no effect here: '
        "Kueue reads it as an annotation of the pod template"
    )


def test_an_unrelated_unknown_key_warns_but_the_policy_still_injects(
    sample_state: ClusterState, default_policy: Policy
) -> None:
    d = judge(job(12, annotations={"kueue.x-k8s.io/team": "ml"}), sample_state, default_policy)
    assert topology_patch(d) == {REQUIRED}
    assert d.warnings[0] == (
        'PodSet "main": unknown annotation "kueue.x-k8s.io/team": '
        "Kueue v0.19.2 defines no such key and ignores it"
    )


def test_misplaced_keys_on_the_workload_itself(sample_state: ClusterState, default_policy: Policy) -> None:
    obj = job(4)
    obj["metadata"]["annotations"] = {ann.QUEUE_NAME_LABEL: "q", REQUIRED: BLOCK}
    obj["metadata"]["labels"]["kueue.x-k8s.io/queue_name"] = "q"
    d = judge(obj, sample_state, default_policy)
    queue = ann.QUEUE_NAME_LABEL
    assert d.warnings[:3] == (
        f'Job "train": unknown label "kueue.x-k8s.io/queue_name"; did you mean "{queue}"? '
        "Kueue v0.19.2 ignores it",
        f'Job "train": annotation "{queue}" has no effect here: Kueue reads it as a label',
        f'Job "train": annotation "{REQUIRED}" has no effect here: Kueue reads it from the pod '
        "template's annotations, not the Job's own",
    )


@pytest.mark.parametrize(
    ("where", "key"),
    [
        ("annotations", "tasgate.io/injct"),
        ("labels", "tasgate.io/inject"),
        ("annotations", "tasgate.com/inject"),
    ],
)
def test_a_near_miss_of_the_opt_out_adds_nothing(
    sample_state: ClusterState, default_policy: Policy, where: str, key: str
) -> None:
    obj = job(12)
    obj["metadata"].setdefault(where, {})[key] = "false"
    d = judge(obj, sample_state, default_policy)
    assert d.allowed and d.patch == () and d.pod_groups == ()
    assert "tasgate" in d.warnings[0] and key in d.warnings[0]
    assert judge(job(12), sample_state, default_policy).patch  # without it, the policy adds labels


def test_objects_as_kueue_leaves_them_raise_no_warning(sample_state: ClusterState) -> None:
    for name in ("job.yaml", "job-admitted.yaml", "lws.yaml", "mpijob.yaml", "mpijob-admitted.yaml"):
        obj = yaml.safe_load((MANIFESTS / "kueue_stored" / name).read_text())
        wl = extract(obj, sample_state.runtimes, obj["metadata"]["namespace"])
        assert wl is not None and key_warnings(obj, wl) == (), name


def test_a_workload_full_of_other_keys_says_nothing(sample_state: ClusterState) -> None:
    every = dict.fromkeys(QUIET, "x")
    obj = job(4, annotations=every, labels=every)
    obj["metadata"] |= {"labels": every, "annotations": every}
    wl = extract(obj, sample_state.runtimes, "default")
    assert wl is not None
    warned = key_warnings(obj, wl)
    # only the known keys in places Kueue does not read them (a TAS key as a label …) are said
    assert warned and all("has no effect here" in w for w in warned)
    named = {re.search(r'(?:label|annotation) "([^"]+)"', w).group(1) for w in warned}  # type: ignore[union-attr]
    assert named <= KNOWN


def test_a_pod_is_checked_once(sample_state: ClusterState, default_policy: Policy) -> None:
    pod = manifest("pod-plain.yaml")
    pod["metadata"].setdefault("annotations", {})[TYPO] = BLOCK
    d = judge(pod, sample_state, default_policy)
    named = [w for w in d.warnings if TYPO in w and "did you mean" in w]
    assert len(named) == 1 and named[0].startswith('Pod "')


def test_a_misspelt_worker_template_leaves_the_leader_alone(
    sample_state: ClusterState, default_policy: Policy
) -> None:
    """An unannotated leader+workers pair: the held worker gets nothing, the leader its own level."""
    obj = manifest("lws-unannotated.yaml")
    obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"] = {"annotations": {TYPO: BLOCK}}
    d = judge(obj, sample_state, default_policy)
    patched = apply_patch(obj, d)
    worker = patched["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"]
    assert worker == {TYPO: BLOCK}
    assert any('PodSet "worker": no topology annotation added' in w for w in d.warnings)


# --- the admission response and the CLI ---------------------------------------------------------


def issue_job() -> dict[str, Any]:
    return job(12, annotations={TYPO: BLOCK})


@pytest.fixture
async def client(aiohttp_client: ClientFactory) -> Client:
    """The app `tasgate serve` runs, on the sample cluster with the default policy."""
    return await aiohttp_client(Harness().app)


async def test_admission_warnings_carry_the_suggestion(client: Client) -> None:
    response = (await post(client, "/mutate", review(issue_job())))["response"]
    assert response["allowed"] is True
    assert any(f'did you mean "{PREFERRED}"?' in w and TYPO in w for w in response["warnings"])
    assert any("no topology annotation added" in w for w in response["warnings"])
    assert all(len(w) <= 256 for w in response["warnings"])
    assert "podset-required-topology" not in json.dumps(response.get("auditAnnotations"))
    assert response["auditAnnotations"]["injected"] == "false"


def test_cli_text_and_json_name_the_key_meant(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(issue_job()))
    run = tasgate("check", "-f", str(path))
    assert run.code == 0, run.err
    assert f'  warning: PodSet "main": unknown annotation "{TYPO}"; did you mean "{PREFERRED}"?' in run.out
    assert "implied (no annotation)" in run.out
    run = tasgate("check", "-o", "json", "-f", str(path))
    (result,) = json.loads(run.out)["results"]
    assert result["outcome"] == "admitted"
    assert any(f'did you mean "{PREFERRED}"?' in w for w in result["warnings"])
    assert not {k for op in result["patch"] for k in added_keys(op)} & set(TOPOLOGY_PATCH)


def test_a_correctly_spelt_manifest_is_unchanged(tmp_path: Path) -> None:
    obj = copy.deepcopy(issue_job())
    annotations = obj["spec"]["template"]["metadata"]["annotations"]
    annotations[PREFERRED] = annotations.pop(TYPO)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(obj))
    (result,) = json.loads(tasgate("check", "-o", "json", "-f", str(path)).out)["results"]
    assert result["warnings"] == [] and result["podSets"][0]["topologyRequest"]["mode"] == "preferred"
