"""Never deny what Kueue would run: workload-level behaviour as Kueue v0.19.2 has it.

Objects come as Kueue's own webhooks leave them (``manifests/kueue_stored``, captured from a
real Kueue by ``e2e/capture_kueue_objects.py``); the cluster mirrors the capture's scenario (one
block of two racks of four 8-GPU nodes, Topology block / rack / hostname, flavor ``pool: gpu``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import pytest

from tests.webhook.conftest import GPU, HOST, KUEUE, MANIFESTS, apply_patch, node, running_pod
from webhook.decide.reasons import Reason
from webhook.decide.review import Outcome, judge
from webhook.files.loader import load
from webhook.files.policy import load_policy
from webhook.state.cluster import ClusterState, build_state
from webhook.wire.admission import parse_review

BLOCK = "topology.example.com/block"
RACK = "topology.example.com/rack"
NAMESPACE = "kueue-capture"
OFFSET = "kueue.x-k8s.io/pod-index-offset"
GROUP = "kueue.x-k8s.io/podset-group-name"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
DEFAULT = load_policy("default")


def stored(name: str) -> dict[str, Any]:
    docs = load([str(MANIFESTS / "kueue_stored" / f"{name}.yaml")])
    return copy.deepcopy(dict(docs[0].obj))


def gpu_nodes(blocks: int = 1, racks: int = 2, per_rack: int = 4, pool: str = "gpu") -> list[dict[str, Any]]:
    return [
        node(f"{pool}-b{b}-r{r}-n{n}", {BLOCK: f"b{b}", RACK: f"b{b}-r{r}", "pool": pool})
        for b in range(blocks)
        for r in range(racks)
        for n in range(per_rack)
    ]


def queues(
    flavors: Sequence[tuple[str, Mapping[str, str], str | None]] = (("gpu-flavor", {"pool": "gpu"}, "topo"),),
    quota: Mapping[str, Any] | None = None,
    covered: Sequence[str] = ("cpu", "memory", GPU),
    cohort: str | None = None,
    name: str = "gpu-cq",
    levels: Mapping[str, Sequence[str]] | None = None,
) -> list[dict[str, Any]]:
    """Topologies, ResourceFlavors (name, nodeLabels, topologyName or None), a ClusterQueue with
    ``quota`` for every flavor (ample by default) and LocalQueue ``gpu-queue``."""
    quota = quota or {"cpu": 10_000, "memory": "100Ti", GPU: 10_000}
    topologies = levels or {"topo": (BLOCK, RACK, HOST)}
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": list(covered),
                "flavors": [
                    {
                        "name": f,
                        "resources": [{"name": r, "nominalQuota": quota[r]} for r in covered if r in quota],
                    }
                    for f, _, _ in flavors
                ],
            }
        ],
    }
    if cohort:
        spec["cohortName"] = cohort
    return [
        *(
            {
                "apiVersion": KUEUE,
                "kind": "Topology",
                "metadata": {"name": t},
                "spec": {"levels": [{"nodeLabel": lv} for lv in lvs]},
            }
            for t, lvs in topologies.items()
        ),
        *(
            {
                "apiVersion": KUEUE,
                "kind": "ResourceFlavor",
                "metadata": {"name": f},
                "spec": {"nodeLabels": dict(labels), **({"topologyName": topo} if topo else {})},
            }
            for f, labels, topo in flavors
        ),
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec},
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": "gpu-queue", "namespace": NAMESPACE},
            "spec": {"clusterQueue": name},
        },
    ]


def state(*objects: Sequence[Mapping[str, Any]]) -> ClusterState:
    return build_state([o for group in objects for o in group])


KUEUE_USER = "system:serviceaccount:kueue-system:kueue-controller-manager"


def review(
    obj: Mapping[str, Any],
    mutating: bool,
    cluster: ClusterState,
    old: Mapping[str, Any] | None = None,
    user: str = "alice",
) -> Outcome:
    request: dict[str, Any] = {
        "uid": "u-1",
        "kind": {"group": "", "version": "v1", "kind": obj.get("kind", "")},
        "resource": {"group": "", "version": "v1", "resource": "things"},
        "operation": "UPDATE" if old is not None else "CREATE",
        "namespace": NAMESPACE,
        "name": obj["metadata"]["name"],
        "userInfo": {"username": user},
        "object": obj,
    }
    if old is not None:
        request["oldObject"] = old
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return judge(parse_review(orjson.dumps(body)), cluster, DEFAULT, mutating)


def through_both_webhooks(obj: Mapping[str, Any], cluster: ClusterState) -> tuple[Outcome, dict[str, Any]]:
    """tasgate's mutate (after Kueue's, which left ``obj``), then its validate on the result."""
    mutated = review(obj, True, cluster)
    assert mutated.allowed, mutated.message
    assert mutated.decision is not None
    final = apply_patch(obj, mutated.decision)
    validated = review(final, False, cluster)
    assert validated.allowed, validated.message
    assert validated.reason is not Reason.MUTATION_MISSING, validated.warnings  # the mutation is there
    return mutated, final


def without(obj: dict[str, Any], key: str) -> dict[str, Any]:
    """``obj`` with the user's annotation ``key`` taken off every pod template."""

    def walk(node_: Any) -> None:
        if isinstance(node_, dict):
            annotations = (node_.get("metadata") or {}).get("annotations")
            if "spec" in node_ and isinstance(annotations, dict):
                annotations.pop(key, None)
            for value in node_.values():
                walk(value)
        elif isinstance(node_, list):
            for value in node_:
                walk(value)

    walk(obj)
    return obj


# --- 1. Kueue's own mutation is never refused ------------------------------------------------------


@pytest.mark.parametrize("name", ["lws", "mpijob"])
def test_kueues_offset_gives_way_to_the_group_and_both_webhooks_pass(name: str) -> None:
    """Kueue wrote pod-index-offset on the worker template because no group was set; tasgate's
    policy groups an unannotated leader+workers, so its group name replaces the offset (with both,
    Kueue's ungater would offset the workers twice), and /validate accepts the result."""
    cluster = state(gpu_nodes(), queues())
    obj = without(stored(name), REQUIRED)
    mutated, final = through_both_webhooks(obj, cluster)
    assert mutated.decision is not None and mutated.decision.patch, "the policy injects a level"
    ops = [(op["op"], op["path"].replace("~1", "/")) for op in mutated.decision.patch]
    assert sum(op == "add" and path.endswith(GROUP) for op, path in ops) == 2, ops
    assert any(op == "remove" and path.endswith(OFFSET) for op, path in ops), ops
    text = orjson.dumps(final).decode()
    assert OFFSET not in text and GROUP in text


@pytest.mark.parametrize("name", ["lws", "mpijob"])
def test_kueues_objects_with_user_annotations_pass(name: str) -> None:
    outcome, _ = through_both_webhooks(stored(name), state(gpu_nodes(), queues()))
    assert outcome.reason is Reason.FITS


def test_an_offset_with_a_group_is_not_refused() -> None:
    """Kueue validates the offset nowhere, and a group beside it is no error there."""
    obj = stored("lws")
    for template in ("leaderTemplate", "workerTemplate"):
        obj["spec"]["leaderWorkerTemplate"][template]["metadata"]["annotations"][GROUP] = "g"
    outcome, _ = through_both_webhooks(obj, state(gpu_nodes(), queues()))
    assert outcome.reason is Reason.FITS


# --- 2. implied TAS only where every flavor is a TAS flavor ----------------------------------------

MIXED = (("gpu-flavor", {"pool": "gpu"}, "topo"), ("plain", {"pool": "cpu"}, None))


def cpu_job(annotations: Mapping[str, str] | None = None, cpu: str = "120") -> dict[str, Any]:
    obj = stored("job")
    template = obj["spec"]["template"]
    template["metadata"]["annotations"] = dict(annotations or {})
    template["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    return obj


def test_unannotated_podset_in_a_mixed_queue_goes_to_the_plain_flavor() -> None:
    """Kueue applies implied TAS only when every flavor of the ClusterQueue is a TAS flavor."""
    cluster = state(gpu_nodes(), gpu_nodes(pool="cpu", racks=1, per_rack=2), queues(MIXED))
    outcome = review(cpu_job(), True, cluster)
    assert outcome.allowed and outcome.reason is Reason.NO_TAS and not outcome.patch


def test_annotated_podset_in_a_mixed_queue_is_judged_on_the_tas_flavor() -> None:
    cluster = state(gpu_nodes(), queues(MIXED))
    outcome = review(cpu_job({REQUIRED: RACK}, cpu="1000"), True, cluster)
    assert not outcome.allowed and outcome.reason is Reason.NEVER_FITS


def test_unannotated_podset_on_a_tas_only_queue_is_implied() -> None:
    cluster = state(gpu_nodes(), queues())
    outcome = review(cpu_job(cpu="1000"), True, cluster)
    assert not outcome.allowed and outcome.reason is Reason.NEVER_FITS


# --- 4. flavors: the next one when the first lacks the level --------------------------------------


def test_a_flavor_without_the_level_is_skipped_for_the_next() -> None:
    flavors = (("flat", {"pool": "gpu"}, "flat-topo"), ("gpu-flavor", {"pool": "gpu"}, "topo"))
    levels = {"flat-topo": (BLOCK, HOST), "topo": (BLOCK, RACK, HOST)}
    outcome = review(stored("job"), True, state(gpu_nodes(), queues(flavors, levels=levels)))
    assert outcome.allowed and outcome.reason is Reason.FITS, outcome.message
    assert outcome.decision is not None and outcome.decision.pod_sets[0].flavor == "gpu-flavor"


def test_no_flavor_with_the_level_is_invalid() -> None:
    flavors = (("flat", {"pool": "gpu"}, "flat-topo"),)
    outcome = review(
        stored("job"), True, state(gpu_nodes(), queues(flavors, levels={"flat-topo": (BLOCK, HOST)}))
    )
    assert not outcome.allowed and outcome.reason is Reason.INVALID and "not a level" in outcome.message


# --- 3. partial admission ------------------------------------------------------------------------


def big_job(pods: int, minimum: str | None, level: str) -> dict[str, Any]:
    obj = stored("job")
    obj["spec"]["parallelism"] = obj["spec"]["completions"] = pods
    obj["spec"]["template"]["metadata"]["annotations"] = {REQUIRED: level}
    if minimum is not None:
        obj["metadata"].setdefault("annotations", {})[MIN_PARALLELISM] = minimum
    return obj


def two_blocks() -> ClusterState:
    return state(gpu_nodes(blocks=2, racks=2, per_rack=4), queues())  # 8 nodes (64 GPUs) per block


def test_partial_admission_admits_what_fits_where_the_full_count_never_would() -> None:
    """40 × 8 GPUs, minimum 8, required block: a block holds 8 such pods, so Kueue's reducer
    admits 8 (the full 40 never fits); tasgate must admit and say so."""
    outcome = review(big_job(40, "8", BLOCK), True, two_blocks())
    assert outcome.allowed and outcome.decision is not None, outcome.message
    verdict = outcome.decision.pod_sets[0]
    assert (verdict.min_count, verdict.admissible, verdict.admitted) == (8, 8, 8)
    assert any("at most 8 of 40" in w for w in outcome.warnings)
    assert verdict.now is not None and verdict.now.fits and verdict.now.assignment is not None
    assert sum(d.count for d in verdict.now.assignment.domains) == 8


def test_partial_admission_now_counts_what_is_free() -> None:
    cluster = state(
        gpu_nodes(blocks=2, racks=2, per_rack=4),
        queues(),
        [running_pod(f"busy-{i}", f"gpu-b0-r0-n{i}", 8) for i in range(4)],
        [running_pod(f"busy1-{i}", f"gpu-b1-r0-n{i}", 8) for i in range(2)],
    )
    outcome = review(big_job(8, "3", BLOCK), True, cluster)
    assert outcome.allowed and outcome.decision is not None
    verdict = outcome.decision.pod_sets[0]
    assert verdict.admitted == 6 and outcome.reason is Reason.FITS  # block b1 has 6 free nodes
    assert any("admits 6 of 8 pods now" in w for w in outcome.warnings)


def test_partial_admission_denies_what_never_fits_even_at_the_minimum() -> None:
    outcome = review(big_job(40, "9", BLOCK), True, two_blocks())
    assert not outcome.allowed and outcome.reason is Reason.NEVER_FITS


@pytest.mark.parametrize(
    ("minimum", "detail"),
    [
        ("40", "Invalid value: 40: should be between 0 and 39"),
        ("0", "Invalid value: 0: should be between 0 and 39"),
        ("x", 'Invalid value: "x": strconv.Atoi: parsing "x": invalid syntax'),
    ],
)
def test_min_parallelism_as_kueues_job_webhook_validates_it(minimum: str, detail: str) -> None:
    outcome = review(big_job(40, minimum, BLOCK), True, two_blocks())
    assert not outcome.allowed and outcome.reason is Reason.INVALID
    assert f"metadata.annotations[{MIN_PARALLELISM}]: {detail}" in outcome.message


# --- 5. quota ------------------------------------------------------------------------------------


def test_a_resource_the_queue_does_not_cover_is_never_admitted() -> None:
    cluster = state(gpu_nodes(), queues(covered=("cpu", "memory")))
    outcome = review(stored("job"), True, cluster)
    assert not outcome.allowed and outcome.reason is Reason.OVER_QUOTA
    assert 'requests nvidia.com/gpu, which ClusterQueue "gpu-cq" does not cover' in outcome.message


def test_more_than_nominal_quota_without_a_cohort_is_denied_with_numbers() -> None:
    cluster = state(gpu_nodes(), queues(quota={"cpu": 100, "memory": "1Ti", GPU: 16}))
    outcome = review(stored("job"), True, cluster)  # 4 pods × 8 GPUs = 32
    assert not outcome.allowed and outcome.reason is Reason.OVER_QUOTA
    assert "nvidia.com/gpu: 32, more than any flavor" in outcome.message and "(16)" in outcome.message


def test_more_than_nominal_quota_in_a_cohort_only_warns() -> None:
    cluster = state(gpu_nodes(), queues(quota={"cpu": 100, "memory": "1Ti", GPU: 16}, cohort="all"))
    outcome = review(stored("job"), True, cluster)
    assert outcome.allowed and any('cohort "all"' in w for w in outcome.warnings)


def test_partial_admission_counts_quota_at_the_minimum() -> None:
    cluster = state(gpu_nodes(blocks=2), queues(quota={"cpu": 100, "memory": "1Ti", GPU: 64}))
    assert review(big_job(16, "8", BLOCK), True, cluster).allowed


# --- 6. Kueue's own writes ------------------------------------------------------------------------


def test_kueues_start_update_is_never_judged() -> None:
    """``job-admitted`` is the Job after Kueue unsuspended it (node selector, scheduling gate,
    template labels and annotation); even with the whole cluster gone it must pass."""
    empty = state(queues())
    outcome = review(stored("job-admitted"), False, empty, old=stored("job"), user=KUEUE_USER)
    assert outcome.allowed and outcome.reason is Reason.NOT_SUSPENDED


def test_a_user_cannot_start_a_queued_gang_around_the_gate() -> None:
    """Unsuspending is Kueue's to do: anyone else who unsuspends a queued Job (and rescales it
    in the same UPDATE) is judged like any change."""
    new = stored("job-admitted")
    new["spec"]["parallelism"] = new["spec"]["completions"] = 40
    outcome = review(new, False, state(gpu_nodes(), queues()), old=stored("job"))
    assert not outcome.allowed and outcome.reason is Reason.NEVER_FITS
    started = review(stored("job-admitted"), True, state(gpu_nodes(), queues()), old=stored("job"))
    assert started.allowed, "Kueue's own start write, under another identity, is judged and fits"
    assert started.reason is not Reason.UNCHANGED, "its nodeSelector changed: judged, not passed"


def test_kueues_stop_update_is_never_judged() -> None:
    outcome = review(stored("job"), False, state(queues()), old=stored("job-admitted"), user=KUEUE_USER)
    assert outcome.allowed and outcome.reason is Reason.NOT_SUSPENDED


def test_a_user_cannot_send_a_running_gang_back_to_the_queue_resized() -> None:
    """Suspending a running workload sends it back to Kueue's queue: by anyone but Kueue, the
    same write may not change its count unjudged. A plain suspend, nothing else changed, passes."""
    cluster = state(gpu_nodes(), queues())
    resized = stored("job-admitted")
    resized["spec"]["suspend"] = True
    plain = copy.deepcopy(resized)
    resized["spec"]["parallelism"] = resized["spec"]["completions"] = 40
    outcome = review(resized, False, cluster, old=stored("job-admitted"))
    assert not outcome.allowed and outcome.reason is Reason.NEVER_FITS
    kept = review(plain, False, cluster, old=stored("job-admitted"))
    assert kept.allowed and kept.reason is Reason.UNCHANGED
    by_kueue = review(resized, False, cluster, old=stored("job-admitted"), user=KUEUE_USER)
    assert by_kueue.allowed and by_kueue.reason is Reason.NOT_SUSPENDED


def test_a_node_constraint_changed_in_a_queued_workload_is_judged() -> None:
    """A nodeSelector, a required node affinity or a toleration is read by the placement: an
    UPDATE that changes one is judged, not passed as unchanged."""
    cluster = state(gpu_nodes(), queues())
    selector = stored("job")
    selector["spec"]["template"]["spec"]["nodeSelector"] = {"no-such-label": "x"}
    outcome = review(selector, False, cluster, old=stored("job"))
    assert not outcome.allowed and outcome.reason is Reason.NEVER_FITS, outcome
    affinity = stored("job")
    term = {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["none"]}]}
    required = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    affinity["spec"]["template"]["spec"]["affinity"] = {"nodeAffinity": required}
    outcome = review(affinity, False, cluster, old=stored("job"))
    assert not outcome.allowed and outcome.reason is Reason.NEVER_FITS, outcome
    toleration = stored("job")
    toleration["spec"]["template"]["spec"]["tolerations"] = [{"key": "k", "operator": "Exists"}]
    outcome = review(toleration, True, cluster, old=stored("job"))
    assert outcome.allowed and outcome.reason is not Reason.UNCHANGED, outcome


def test_a_users_change_to_a_queued_workload_is_judged() -> None:
    old, new = stored("job"), stored("job")
    new["spec"]["parallelism"] = new["spec"]["completions"] = 40
    outcome = review(new, False, state(gpu_nodes(), queues()), old=old)
    assert not outcome.allowed and outcome.reason is Reason.NEVER_FITS


# --- 7. owners -----------------------------------------------------------------------------------


def owned_job(kind: str, api_version: str) -> dict[str, Any]:
    obj = big_job(40, None, RACK)
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": api_version, "kind": kind, "name": "owner", "uid": "u", "controller": True}
    ]
    return obj


@pytest.mark.parametrize(("kind", "api_version"), [("CronJob", "batch/v1"), ("ConfigMap", "v1")])
def test_a_job_owned_by_a_kind_kueue_does_not_integrate_is_judged(kind: str, api_version: str) -> None:
    outcome = review(owned_job(kind, api_version), True, state(gpu_nodes(), queues()))
    assert not outcome.allowed and outcome.reason is Reason.NEVER_FITS


def test_a_job_owned_by_a_jobset_is_its_parents() -> None:
    outcome = review(owned_job("JobSet", "jobset.x-k8s.io/v1alpha2"), True, state(gpu_nodes(), queues()))
    assert outcome.allowed and outcome.reason is Reason.OWNED


# --- 9. small divergences --------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["true", "True", "TRUE", "t", "1"])
def test_every_go_true_is_unconstrained(value: str) -> None:
    obj = stored("job")
    obj["spec"]["template"]["metadata"]["annotations"] = {
        "kueue.x-k8s.io/podset-unconstrained-topology": value
    }
    outcome = review(obj, True, state(gpu_nodes(), queues()))
    assert outcome.allowed and outcome.decision is not None
    assert outcome.decision.pod_sets[0].request.mode.value == "unconstrained"


# --- 8. requests as Kueue counts them -------------------------------------------------------------


def head_requests(obj: Mapping[str, Any]) -> Mapping[str, int]:
    from webhook.model.workloads import extract  # noqa: PLC0415 - the adapter under test

    wl = extract(obj)
    assert wl is not None
    return wl.pod_sets[0].requests


def ray_cluster(**spec: Any) -> dict[str, Any]:
    obj = load([str(MANIFESTS / "raycluster.yaml")])[0].obj
    obj = copy.deepcopy(dict(obj))
    obj["spec"].update(spec)
    return obj


def test_ray_head_counts_the_autoscaler_sidecar() -> None:
    assert head_requests(ray_cluster()) == {"cpu": 2000, "memory": 8 * 2**30}
    assert head_requests(ray_cluster(enableInTreeAutoscaling=True)) == {
        "cpu": 2500,
        "memory": 8 * 2**30 + 512 * 2**20,
    }
    own = {"autoscalerOptions": {"resources": {"requests": {"cpu": "1"}}}}
    assert head_requests(ray_cluster(enableInTreeAutoscaling=True, **own))["cpu"] == 3000


def test_ray_head_counts_the_gcs_fault_tolerance_cleanup() -> None:
    small = ray_cluster(gcsFaultToleranceOptions={"redisAddress": "redis:6379"})
    small["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "100m"}
    }
    assert head_requests(small) == {"cpu": 200, "memory": 256 * 2**20}
    annotated = ray_cluster()
    annotated["metadata"]["annotations"] = {"ray.io/ft-enabled": "True"}
    assert head_requests(annotated) == {"cpu": 2000, "memory": 8 * 2**30}  # already above


def test_rayjob_sidecar_mode_adds_the_submitter_to_the_head() -> None:
    cluster = ray_cluster()
    job = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "rj", "namespace": "default"},
        "spec": {"submissionMode": "SidecarMode", "rayClusterSpec": cluster["spec"]},
    }
    assert head_requests(job) == {"cpu": 2500, "memory": 8 * 2**30 + 200 * 2**20}


def limit_range(namespace: str = NAMESPACE, **limits: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "defaults", "namespace": namespace},
        "spec": {"limits": [{"type": "Container", **limits}]},
    }


def test_limit_range_defaults_fill_what_containers_leave_out() -> None:
    obj = stored("job")
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {GPU: "8"}}
    lr = limit_range(defaultRequest={"cpu": "30"}, default={"memory": "400Gi"})
    cluster = state(gpu_nodes(), queues(), [lr])
    outcome = review(obj, True, cluster)
    assert outcome.decision is not None
    assert dict(outcome.decision.pod_sets[0].requests) == {"cpu": 30_000, "memory": 400 * 2**30, GPU: 8}
    assert outcome.allowed  # 30 cpu fit a 64-cpu node
    bigger = state(gpu_nodes(), queues(), [limit_range(defaultRequest={"cpu": "100"})])
    assert review(obj, True, bigger).reason is Reason.NEVER_FITS


def test_runtime_class_overhead_is_counted() -> None:
    obj = stored("job")
    obj["spec"]["template"]["spec"]["runtimeClassName"] = "kata"
    kata = {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": "kata"},
        "handler": "kata",
        "overhead": {"podFixed": {"cpu": "250m", "memory": "160Mi"}},
    }
    outcome = review(obj, True, state(gpu_nodes(), queues(), [kata]))
    assert outcome.decision is not None
    assert outcome.decision.pod_sets[0].requests["cpu"] == 1250
