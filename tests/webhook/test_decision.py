"""decide(): one object in, one verdict out — per workload kind, then per verdict.

The sample cluster (webhook.files.sample) has 2 blocks x 4 racks x 4 hosts of 8-GPU nodes. Empty, a
rack holds 4 pods of 8 GPUs and a block 16. Now, rack b1-r1 is full, b1-r2 and b2-r1 have no
whole 8-GPU host free, and b2-r4 has one cordoned and one NotReady host: the best block holds
10 such pods now (b2: r2 + r3 + two hosts of r4) and the best rack 4.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from scorer.model import Mode
from tests.webhook.conftest import (
    BLOCK,
    COSCHED_LABEL,
    GI,
    GPU,
    HOST,
    LEADER_WORKERS,
    MI,
    PREFERRED,
    QUEUE_LABEL,
    RACK,
    REQUIRED,
    SLICE_SIZE,
    blocks_of,
    hosts,
    job,
    judge,
    kueue_objects,
    manifest,
    manifests,
    namespace_object,
    node,
    pod_set,
    policy,
    rack_cluster,
    racks_of,
    rule,
    sample_without,
    shape,
    team_job,
)
from webhook.decide.messages import ADMISSION_WARNING_LIMIT as WARNING_LIMIT
from webhook.decide.policy import Policy
from webhook.files.sample import sample_objects
from webhook.state.cluster import ClusterState, build_state


def sample_holds(gpus: int, level: str | None = None) -> int:
    """Pods of ``gpus`` GPUs the largest ``level`` domain of the sample cluster holds when empty
    (the whole cluster when None): each Node's GPUs over the pod's, summed per domain, counted
    from the sample's own Node objects — an expected figure independent of what tasgate says."""
    per_domain: dict[str, int] = {}
    for obj in sample_objects():
        if obj["kind"] == "Node":
            domain = obj["metadata"]["labels"][level] if level else "all"
            per_host = int(obj["status"]["allocatable"][GPU]) // gpus
            per_domain[domain] = per_domain.get(domain, 0) + per_host
    return max(per_domain.values())


RACK_HOLDS, BLOCK_HOLDS, ALL_HOLD = sample_holds(8, RACK), sample_holds(8, BLOCK), sample_holds(8)

# --- one table row per workload kind -------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """What decide() says about one manifest on the sample cluster with the default policy."""

    file: str
    kind: str
    name: str
    reason: str
    pod_sets: list[tuple[str, int]]
    # (mode, level, group, injected) per PodSet, in Kueue's order
    requests: list[tuple[str, str | None, str | None, bool]]
    min_member: int | None = None  # the PodGroup the default policy asks for (None: no PodGroup)
    per_pod: dict[str, dict[str, int]] = field(default_factory=dict)
    document: int = 0
    warnings: tuple[str, ...] = ()


KINDS = [
    Kind(
        "job-required.yaml",
        "Job",
        "tas-sample-required",
        "fits",
        [("main", 10)],
        [("required", RACK, None, False)],
        per_pod={"main": {"cpu": 1000, "memory": 200 * MI}},
    ),
    Kind(
        "jobset-tas-combined.yaml",
        "JobSet",
        "jobset-tas-combined",
        "fits",
        [("workers", 8)],
        [("required", BLOCK, None, False)],
    ),
    Kind(
        "jobset-gpu-unannotated.yaml",
        "JobSet",
        "llm-finetune",
        "fits",
        [("driver", 1), ("workers", 6)],
        [("required", BLOCK, LEADER_WORKERS, True), ("required", BLOCK, LEADER_WORKERS, True)],
        min_member=7,
    ),
    Kind(
        "pytorchjob-simple.yaml",
        "PyTorchJob",
        "pytorch-simple",
        "fits",
        [("master", 1), ("worker", 1)],
        [("implied", None, None, False), ("implied", None, None, False)],
    ),
    Kind(
        "pytorchjob-mnist-nccl.yaml",
        "PyTorchJob",
        "pytorch-dist-mnist-nccl",
        "fits",
        [("master", 1), ("worker", 3)],
        [("required", RACK, LEADER_WORKERS, True), ("required", RACK, LEADER_WORKERS, True)],
        min_member=4,
        per_pod={"worker": {GPU: 8}},  # limits stand in for absent requests
    ),
    Kind(
        "tfjob.yaml",
        "TFJob",
        "tf-dist",
        "fits",
        [("chief", 1), ("ps", 2), ("worker", 4)],  # Kueue's order, not the manifest's
        [("required", RACK, None, True)] * 3,
        min_member=7,
    ),
    Kind(
        "mpijob-pi.yaml",
        "MPIJob",
        "pi",
        "fits",
        [("launcher", 1), ("worker", 2)],
        [("implied", None, None, False)] * 2,
        per_pod={"launcher": {"cpu": 1000, "memory": GI}, "worker": {"cpu": 1000, "memory": GI}},
    ),
    Kind(
        "lws-tas.yaml",
        "LeaderWorkerSet",
        "nginx-leaderworkerset",
        "fits",
        [("leader", 1), ("worker", 2)],
        [("required", RACK, "lws-group", False)] * 2,
        min_member=None,  # no GPUs: the default policy adds no gang labels
    ),
    Kind(
        "lws-unannotated.yaml",
        "LeaderWorkerSet",
        "vllm-serving",
        "fits",
        [("leader", 1), ("worker", 3)],
        # The default policy groups leader and workers (in place of Kueue's worker offset).
        [("required", RACK, "tasgate-leader-workers", True)] * 2,
        min_member=None,
        warnings=("no gang labels added: its 2 replica groups are separate gangs",),
    ),
    Kind(
        "lws-one-group.yaml",
        "LeaderWorkerSet",
        "vllm-serving",
        "fits",
        [("leader", 1), ("worker", 3)],
        # The default policy groups leader and workers (in place of Kueue's worker offset).
        [("required", RACK, "tasgate-leader-workers", True)] * 2,
        min_member=4,
    ),
    Kind(
        "rayjob.yaml",
        "RayJob",
        "rayjob-sample",
        "fits",
        [("head", 1), ("gpu-workers", 4), ("submitter", 1)],
        # KubeRay's default submitter is not in the object: nothing is injected there.
        [("required", RACK, None, True), ("required", RACK, None, True), ("implied", None, None, False)],
        min_member=5,  # the submitter starts after the cluster is up: not part of the gang
        per_pod={"submitter": {"cpu": 500, "memory": 200 * MI}},
    ),
    Kind(
        "raycluster.yaml",
        "RayCluster",
        "raycluster-kueue",
        "fits",
        [("head", 1), ("small", 3), ("gpu", 2)],
        [("required", HOST, None, True), ("required", HOST, None, True), ("required", RACK, None, False)],
        min_member=6,
    ),
    Kind(
        "trainjob.yaml",
        "TrainJob",
        "torch-ddp",
        "fits",
        [("node", 4)],
        [("implied", None, None, False)],  # templates live in the runtime: nothing to patch
        per_pod={"node": {"cpu": 16000, "memory": 128 * GI, GPU: 8}},
    ),
    Kind(
        "pod-plain.yaml",
        "Pod",
        "notebook",
        "fits",
        [("main", 1)],
        [("implied", None, None, False)],
    ),
    Kind(
        "pod-group.yaml",
        "Pod",
        "sample-pod-1",
        "fits",
        [("main", 4)],
        [("required", RACK, None, True)],
        min_member=4,
        document=1,
    ),
    Kind(
        "pytorchjob-waits.yaml",
        "PyTorchJob",
        "llama-finetune",
        "waits",
        [("master", 1), ("worker", 15)],
        [("required", BLOCK, None, False)] * 2,
        min_member=16,
    ),
]


@pytest.mark.parametrize("case", KINDS, ids=[f"{k.kind}-{k.file}" for k in KINDS])
def test_each_workload_kind_on_the_sample_cluster(
    case: Kind, trainer_state: ClusterState, default_policy: Policy
) -> None:
    obj = manifests(case.file)[case.document]
    d = judge(obj, trainer_state, default_policy)

    assert (d.kind, d.namespace, d.name) == (case.kind, "default", case.name)
    assert (d.allowed, d.reason, d.message) == (True, case.reason, "")
    assert shape(d) == case.pod_sets
    got = [(v.request.mode.value, v.request.level, v.request.group, v.injected) for v in d.pod_sets]
    assert got == case.requests
    assert d.topology == "default" and d.cluster_queue == "tas-cluster-queue"
    assert {v.flavor for v in d.pod_sets} == {"tas-flavor"}
    assert (d.audit["decision"], d.audit["reason"]) == ("allow", case.reason)
    for name, requests in case.per_pod.items():
        assert dict(pod_set(d, name).requests) == requests
    if case.min_member is None:
        assert d.pod_groups == ()
        assert not any(COSCHED_LABEL in str(op) for op in d.patch)
    else:
        (group,) = d.pod_groups
        assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
        assert group["spec"]["minMember"] == case.min_member
        assert group["spec"]["scheduleTimeoutSeconds"] == 600
    if case.reason == "fits":
        assert d.warnings == case.warnings
        assert all(v.now is not None and v.now.fits for v in d.pod_sets)


def test_required_rack_is_placed_inside_one_rack(sample_state: ClusterState, default_policy: Policy) -> None:
    d = judge(manifest("job-required.yaml"), sample_state, default_policy)
    main = pod_set(d, "main")
    for when in ("now", "never"):
        placed = hosts(main, when)
        assert sum(n for _, n in placed) == 10
        assert len(racks_of(placed)) == 1
    # Now, rack b1-r1 is busy but CPU pods still fit; a cordoned or NotReady host is never used.
    assert not {"b2-r4-h3", "b2-r4-h4"} & {h for h, _ in hosts(main, "now")}


def test_slices_of_four_land_in_one_rack_each(sample_state: ClusterState, default_policy: Policy) -> None:
    d = judge(manifest("jobset-tas-combined.yaml"), sample_state, default_policy)
    workers = pod_set(d, "workers")
    assert (workers.request.slice_level, workers.request.slice_size) == (RACK, 4)
    placed = hosts(workers, "never")
    assert sum(n for _, n in placed) == 8 and len(blocks_of(placed)) == 1


def test_gpu_gangs_are_spread_one_pod_per_host(sample_state: ClusterState, default_policy: Policy) -> None:
    d = judge(manifest("lws-unannotated.yaml"), sample_state, default_policy)
    leader, worker = pod_set(d, "leader"), pod_set(d, "worker")
    group = hosts(leader, "now") + hosts(worker, "now")
    assert len(group) == 4 and all(n == 1 for _, n in group)
    # Kueue places an offset LWS's leader and workers as two PodSets: each in one rack.
    assert len(racks_of(hosts(worker, "now"))) == 1
    # The full rack b1-r1 and the half-used b1-r2 cannot take an 8-GPU pod now.
    assert not racks_of(group) & {"b1-r1", "b1-r2"}


def test_trainjob_without_its_runtime_is_not_checked(
    sample_state: ClusterState, default_policy: Policy
) -> None:
    d = judge(manifest("trainjob.yaml"), sample_state, default_policy)
    assert (d.allowed, d.reason, d.patch) == (True, "unresolved", ())
    assert d.warnings == ("not checked: ClusterTrainingRuntime torch-distributed is not known",)


def test_trainjob_too_big_for_the_cluster_is_denied(
    trainer_state: ClusterState, default_policy: Policy
) -> None:
    obj = manifest("trainjob.yaml")
    obj["spec"]["trainer"]["numNodes"] = 40
    d = judge(obj, trainer_state, default_policy)
    assert (d.allowed, d.reason) == (False, "never-fits")
    # Unannotated (implied): Kueue may spread it, so only the whole topology is the limit.
    assert d.message == (
        'PodSet "node" (40 pods × nvidia.com/gpu: 8) can never be placed: the whole topology holds only '
        f"{ALL_HOLD} such pods even when empty; ask for at most {ALL_HOLD} pods."
    )


def test_every_pod_of_a_kueue_pod_group_joins_one_pod_group(
    sample_state: ClusterState, default_policy: Policy
) -> None:
    first, second = (judge(p, sample_state, default_policy) for p in manifests("pod-group.yaml"))
    assert first.pod_groups == second.pod_groups
    (group,) = first.pod_groups
    assert group["metadata"] == {"name": "sample-group", "namespace": "default"}
    assert group["spec"]["minResources"] == {"cpu": "32", "memory": "256Gi", GPU: "32"}
    labels = {op["path"]: op["value"] for op in first.patch + second.patch if "pod-group" in op["path"]}
    assert set(labels.values()) == {"sample-group"}


def test_raycluster_without_gpus_gets_no_gang(sample_state: ClusterState, default_policy: Policy) -> None:
    obj = manifest("raycluster.yaml")
    del obj["spec"]["workerGroupSpecs"][1]
    d = judge(obj, sample_state, default_policy)
    assert (d.reason, d.patch, d.pod_groups) == ("fits", (), ())
    assert [v.request.mode for v in d.pod_sets] == [Mode.IMPLIED, Mode.IMPLIED]


# --- verdicts ------------------------------------------------------------------------------------


NEVER_FITS_RACK = (
    'PodSet "workers" (8 pods × nvidia.com/gpu: 8) can never fit one "cloud.provider.com/topology-rack" '
    f"domain: the largest rack holds {RACK_HOLDS} such pods even when empty (limited by nvidia.com/gpu). "
    f'A "cloud.provider.com/topology-block" domain holds {BLOCK_HOLDS}; use that level, '
    f"podset-preferred-topology, or at most {RACK_HOLDS} pods."
)


def test_never_fits_is_denied_with_the_numbers(sample_state: ClusterState, default_policy: Policy) -> None:
    d = judge(manifest("jobset-never-fits.yaml"), sample_state, default_policy)
    assert (d.allowed, d.reason) == (False, "never-fits")
    assert d.message == NEVER_FITS_RACK
    assert d.patch == () and d.pod_groups == ()
    workers = pod_set(d, "workers")
    assert workers.never is not None and not workers.never.fits and workers.never.fit_count == RACK_HOLDS
    assert f"allows to fit only {RACK_HOLDS} out of 8 pod(s)" in workers.never.reason
    assert (d.audit["decision"], d.audit["reason"]) == ("deny", "never-fits") and d.audit[
        "fits-when-empty"
    ] == "false"


def test_never_fits_when_memory_also_limits(sample_state: ClusterState, none_policy: Policy) -> None:
    obj = manifest("jobset-never-fits.yaml")
    requests = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    requests["resources"]["requests"]["memory"] = "512Gi"  # 1000Gi nodes: one such pod per host
    d = judge(obj, sample_state, none_policy)
    assert "(limited by memory and nvidia.com/gpu)" in d.message


def test_never_fits_anywhere_says_what_the_whole_topology_holds(
    sample_state: ClusterState, none_policy: Policy
) -> None:
    d = judge(job(40, annotations={REQUIRED: BLOCK}), sample_state, none_policy)
    assert d.message == (
        'PodSet "main" (40 pods × nvidia.com/gpu: 8) can never fit one "cloud.provider.com/topology-block" '
        f"domain: the largest block holds {BLOCK_HOLDS} such pods even when empty (limited by "
        f"nvidia.com/gpu). The whole topology holds only {ALL_HOLD} such pods even when empty; ask for "
        f"at most {ALL_HOLD}."
    )


def test_no_single_domain_but_the_topology_holds_it(sample_state: ClusterState, none_policy: Policy) -> None:
    d = judge(job(20, annotations={REQUIRED: BLOCK}), sample_state, none_policy)
    assert d.message.endswith(
        f"No single domain holds it; use podset-preferred-topology to spread, or at most {BLOCK_HOLDS} pods."
    )
    spread = judge(job(20, annotations={PREFERRED: BLOCK}), sample_state, none_policy)
    assert (spread.allowed, spread.reason) == (True, "waits")  # 20 of 32 hosts: 29 usable now


def test_waits_is_allowed_with_a_short_warning(sample_state: ClusterState, default_policy: Policy) -> None:
    d = judge(manifest("pytorchjob-waits.yaml"), sample_state, default_policy)
    assert (d.allowed, d.reason, d.message) == (True, "waits", "")
    assert d.warnings == (
        'PodSet "worker" must wait: the best block has room for 10 of 15 pods now (5 short); '
        "it fits when capacity frees up",
    )
    assert all(len(w) <= WARNING_LIMIT for w in d.warnings)
    master, worker = pod_set(d, "master"), pod_set(d, "worker")
    assert master.now is not None and master.now.fits
    assert worker.now is not None and not worker.now.fits
    assert worker.never is not None and worker.never.fits
    assert (d.audit["decision"], d.audit["reason"]) == ("allow", "waits") and d.audit["fits-now"] == "false"
    assert d.pod_groups and d.patch  # waiting workloads still get their gang


def test_waits_for_a_rack(none_policy: Policy) -> None:
    # Every host has 6 of its 8 GPUs taken: no 8-GPU pod fits now, four per rack when empty.
    d = judge(job(4, gpus=8, annotations={REQUIRED: RACK}), build_state(busy_sample(6)), none_policy)
    assert (d.allowed, d.reason) == (True, "waits")
    (warning,) = d.warnings
    assert warning == (
        'PodSet "main" must wait: the best rack has room for 0 of 4 pods now (4 short); '
        "it fits when capacity frees up"
    )


def busy_sample(gpus_used: int) -> list[dict[str, Any]]:
    """The sample cluster with ``gpus_used`` GPUs taken on every host."""
    objects = [o for o in sample_objects() if o["kind"] != "Pod"]
    for o in list(objects):
        if o["kind"] == "Node":
            name = o["metadata"]["name"]
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"busy-{name}", "namespace": "default"},
                    "spec": {
                        "nodeName": name,
                        "containers": [{"name": "c", "resources": {"requests": {GPU: str(gpus_used)}}}],
                    },
                    "status": {"phase": "Running"},
                }
            )
    return objects


def test_fits_is_allowed_without_warnings(sample_state: ClusterState, none_policy: Policy) -> None:
    d = judge(job(4, annotations={REQUIRED: RACK}), sample_state, none_policy)
    assert (d.allowed, d.reason, d.message, d.warnings) == (True, "fits", "", ())
    assert d.patch == () and d.pod_groups == ()  # policy none adds nothing
    assert d.audit == {
        "decision": "allow",
        "reason": "fits",
        "topology": "default",
        "flavor": "tas-flavor",
        "level": RACK,
        "fits-now": "true",
        "fits-when-empty": "true",
        "injected": "false",
        "kueue-release": "unknown",  # no Kueue Deployment in the sample cluster
    }


def test_unknown_workload_kind_is_allowed_untouched_with_a_warning(
    sample_state: ClusterState, default_policy: Policy
) -> None:
    d = judge(manifest("unknown-kind.yaml"), sample_state, default_policy)
    assert (d.allowed, d.reason, d.patch, d.pod_sets, d.pod_groups) == (True, "unknown-kind", (), (), ())
    (warning,) = d.warnings
    assert warning.startswith("tasgate does not know TrainingThing (example.com/v1); not checked:")
    assert len(warning) <= WARNING_LIMIT


def test_unknown_version_of_a_known_kind_says_which_it_reads(
    sample_state: ClusterState, default_policy: Policy
) -> None:
    obj = manifest("mpijob-pi.yaml")
    obj["apiVersion"] = "kubeflow.org/v1"
    d = judge(obj, sample_state, default_policy)
    assert (d.allowed, d.reason, d.patch) == (True, "unknown-kind", ())
    (warning,) = d.warnings
    assert warning.startswith("tasgate does not know MPIJob (kubeflow.org/v1); not checked:")
    assert len(warning) <= WARNING_LIMIT


@pytest.mark.parametrize("file", ["configmap.yaml", "tas-queues.yaml", "clustertrainingruntime.yaml"])
def test_non_workloads_are_not_looked_at(
    file: str, sample_state: ClusterState, default_policy: Policy
) -> None:
    for obj in manifests(file):
        d = judge(obj, sample_state, default_policy)
        assert (d.allowed, d.reason, d.warnings, d.patch, d.pod_sets) == (True, "not-a-workload", (), (), ())


def test_exempt_namespace_is_neither_judged_nor_mutated(
    sample_state: ClusterState, default_policy: Policy
) -> None:
    obj = manifest("jobset-never-fits.yaml")
    obj["metadata"]["namespace"] = "kube-system"
    d = judge(obj, sample_state, default_policy)
    assert (d.allowed, d.reason, d.message, d.patch, d.warnings) == (True, "exempt", "", (), ())
    # Even a malformed workload there is left to the API server.
    broken = job(4, namespace="tasgate-system")
    broken["spec"]["parallelism"] = "four"
    assert judge(broken, sample_state, default_policy).reason == "exempt"
    # The request's namespace counts when the object names none.
    del obj["metadata"]["namespace"]
    assert judge(obj, sample_state, default_policy, namespace="kube-system").reason == "exempt"


@pytest.mark.parametrize(
    ("drop", "missing"),
    [
        (("LocalQueue", "tas-user-queue"), 'LocalQueue "default/tas-user-queue" not found'),
        (
            ("ClusterQueue", "tas-cluster-queue"),
            'ClusterQueue "tas-cluster-queue" of LocalQueue "default/tas-user-queue" not found',
        ),
        (
            ("ResourceFlavor", "tas-flavor"),
            'ResourceFlavor "tas-flavor" of ClusterQueue "tas-cluster-queue" not found',
        ),
        (("Topology", "default"), 'Topology "default" of ResourceFlavor "tas-flavor" not found'),
    ],
)
def test_missing_kueue_objects_are_a_config_problem_not_a_fit_failure(
    drop: tuple[str, str], missing: str, default_policy: Policy
) -> None:
    # 64 pods could never fit; the verdict must still be about the configuration.
    d = judge(job(64, annotations={REQUIRED: RACK}), sample_without(drop), default_policy)
    assert (d.allowed, d.reason, d.message, d.patch) == (True, "kueue-config", "", ())
    assert d.warnings == (f"not checked: {missing}",)
    assert d.queue == "tas-user-queue"


def test_queue_in_another_namespace_is_not_found(sample_state: ClusterState, default_policy: Policy) -> None:
    d = judge(job(2, namespace="team-a"), sample_state, default_policy)
    assert d.reason == "kueue-config"
    assert d.warnings == ('not checked: LocalQueue "team-a/tas-user-queue" not found',)


def test_cluster_queue_without_tas_flavors_is_not_checked() -> None:
    objects = kueue_objects() + rack_cluster()
    flavor = next(o for o in objects if o["kind"] == "ResourceFlavor")
    del flavor["spec"]["topologyName"]
    d = judge(job(64, queue="q", namespace="team"), build_state(objects), policy([rule()]))
    assert (d.allowed, d.reason, d.warnings) == (True, "no-tas", ())


def test_no_queue_uses_the_policy_default_topology(sample_state: ClusterState, none_policy: Policy) -> None:
    with_default = policy([rule(mode="none")])
    d = judge(job(4, annotations={REQUIRED: RACK}, queue=None), sample_state, with_default)
    assert (d.reason, d.queue, d.cluster_queue, d.topology) == ("fits", None, None, "default")
    assert pod_set(d, "main").flavor is None and d.audit["flavor"] == "policy-default"
    # Without a default topology (policy none) there is nothing to place against.
    assert judge(job(4, queue=None), sample_state, none_policy).reason == "no-tas"


def test_policy_default_topology_that_does_not_exist_means_no_tas() -> None:
    state = build_state(rack_cluster())  # nodes, no Kueue objects at all
    d = judge(job(2, queue=None), state, policy([rule()]))
    assert (d.allowed, d.reason, d.warnings) == (True, "no-tas", ())


def test_policy_default_topology_by_levels() -> None:
    state = build_state(rack_cluster(racks=2, hosts=2))
    pol = policy([rule(mode="none")], defaultTopology={"levels": ["rack", HOST]})
    ok = judge(job(2, annotations={REQUIRED: "rack"}, queue=None), state, pol)
    assert (ok.reason, ok.topology) == ("fits", "default")
    too_big = judge(job(3, annotations={REQUIRED: "rack"}, queue=None), state, pol)
    assert (too_big.allowed, too_big.reason) == (False, "never-fits")
    assert "the largest rack holds 2 such pods even when empty" in too_big.message


# --- several TAS flavors -------------------------------------------------------------------------


def two_flavor_state() -> ClusterState:
    """ClusterQueue cq lists flavor "small" (1 rack of 2 hosts) before "big" (1 rack of 4 hosts)."""
    objects = kueue_objects(flavors={"small": {"pool": "a"}, "big": {"pool": "b"}})
    objects += rack_cluster(racks=1, hosts=2, pool="a", prefix="a")
    objects += rack_cluster(racks=1, hosts=4, pool="b", prefix="b")
    return build_state(objects)


def test_first_flavor_that_fits_is_chosen() -> None:
    state = two_flavor_state()
    none = policy([], defaultTopology={"name": "topo"})
    small = judge(team_job(2, annotations={REQUIRED: "rack"}), state, none)
    assert (small.reason, pod_set(small, "main").flavor, small.audit["flavor"]) == ("fits", "small", "small")
    big = judge(team_job(4, annotations={REQUIRED: "rack"}), state, none)
    assert (big.allowed, big.reason, pod_set(big, "main").flavor) == (True, "fits", "big")
    assert [(f.flavor, f.fits_now, f.fits_when_empty) for f in big.flavors] == [
        ("small", False, False),
        ("big", True, True),
    ]
    assert {h for h, _ in hosts(pod_set(big, "main"))} == {"b1-1", "b1-2", "b1-3", "b1-4"}


def test_denial_speaks_for_the_flavor_that_comes_closest() -> None:
    d = judge(team_job(6, annotations={REQUIRED: "rack"}), two_flavor_state(), policy([]))
    assert (d.allowed, d.reason, pod_set(d, "main").flavor) == (False, "never-fits", "big")
    assert "the largest rack holds 4 such pods even when empty" in d.message


def test_tightest_level_is_worked_out_per_flavor() -> None:
    # In "small" no level holds 4 pods; in "big" one rack does: inject the rack, not the block.
    d = judge(team_job(4), two_flavor_state(), policy([rule()]))
    assert (d.reason, pod_set(d, "main").flavor) == ("fits", "big")
    assert pod_set(d, "main").request.level == "rack"
    assert d.patch[0]["value"] == {"annotations": {REQUIRED: "rack"}}


# --- validation errors ---------------------------------------------------------------------------


def test_validation_errors_are_all_reported(sample_state: ClusterState, default_policy: Policy) -> None:
    obj = job(4, annotations={REQUIRED: RACK, PREFERRED: BLOCK, SLICE_SIZE: "2"})
    d = judge(obj, sample_state, default_policy)
    assert (d.allowed, d.reason, d.patch) == (False, "invalid", ())
    assert d.message.startswith("[") and d.message.endswith("]")
    assert "must not contain more than one topology annotation" in d.message
    assert f"spec.template.metadata.annotations[{SLICE_SIZE}]" in d.message
    assert d.message.count("spec.template.metadata.annotations") >= 2


def test_level_that_is_not_in_the_topology_is_invalid(
    sample_state: ClusterState, none_policy: Policy
) -> None:
    d = judge(job(4, annotations={REQUIRED: "cloud.provider.com/topology-zone"}), sample_state, none_policy)
    assert (d.allowed, d.reason) == (False, "invalid")
    assert f"spec.template.metadata.annotations[{REQUIRED}]" in d.message
    assert "cloud.provider.com/topology-zone" in d.message


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("nodeSelector", "gpu", "spec.template.spec.nodeSelector"),
        ("tolerations", "all", "spec.template.spec.tolerations"),
        (
            "affinity",
            {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": "x"}}},
            "spec.template.spec.affinity.nodeAffinity",
        ),
    ],
)
def test_malformed_scheduling_fields_are_denied_not_raised(
    field: str, value: Any, path: str, sample_state: ClusterState, default_policy: Policy
) -> None:
    d = judge(job(4, **{field: value}), sample_state, default_policy)
    assert (d.allowed, d.reason) == (False, "invalid")
    assert d.message.startswith(path)


@pytest.mark.parametrize(
    ("quantity", "fragment"),
    [
        ("1e400", 'requests.cpu: Invalid value: "1e400"'),
        (1e400, "requests.cpu: Invalid value: inf"),
        ("lots", 'requests.cpu: Invalid value: "lots"'),
    ],
)
def test_absurd_quantities_are_denied_naming_the_field(
    quantity: Any, fragment: str, sample_state: ClusterState, default_policy: Policy
) -> None:
    obj = job(4)
    obj["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = quantity
    d = judge(obj, sample_state, default_policy)
    assert (d.allowed, d.reason) == (False, "invalid")
    assert d.message.startswith("spec.template.spec.containers[0].resources.requests.cpu:")
    assert fragment in d.message


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ("oops", "metadata: Invalid value: must be an object"),
        ({"name": "x", "labels": ["a"]}, "metadata.labels: Invalid value: must be a map of strings"),
    ],
)
def test_malformed_metadata_is_denied_not_raised(
    metadata: Any, message: str, sample_state: ClusterState, default_policy: Policy
) -> None:
    obj = job(2)
    obj["metadata"] = metadata
    d = judge(obj, sample_state, default_policy)
    assert (d.allowed, d.reason, d.message) == (False, "invalid", message)


def test_namespace_labels_come_from_the_namespace_objects() -> None:
    objects = kueue_objects() + rack_cluster() + [namespace_object("team", {"tier": "prod"})]
    pol = policy([rule(level="rack", match={"namespaceSelector": {"matchLabels": {"tier": "prod"}}})])
    d = judge(team_job(2), build_state(objects), pol)
    assert pod_set(d, "main").injected
    objects[-1] = namespace_object("team", {"tier": "dev"})
    assert not pod_set(judge(team_job(2), build_state(objects), pol), "main").injected


def test_taints_and_node_selectors_decide_which_hosts_count() -> None:
    taint = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}
    objects = [
        *kueue_objects(),
        node("n1", {"block": "b", "rack": "r1", "pool": "gpu"}, taints=[taint]),
        node("n2", {"block": "b", "rack": "r1", "pool": "gpu"}),
    ]
    state = build_state(objects)
    none = policy([], defaultTopology={"name": "topo"})
    d = judge(team_job(2, annotations={REQUIRED: "rack"}), state, none)
    assert (d.reason, pod_set(d, "main").never.fit_count) == ("never-fits", 1)  # type: ignore[union-attr]
    assert "taint" in pod_set(d, "main").never.reason  # type: ignore[union-attr]
    tolerated = team_job(
        2,
        annotations={REQUIRED: "rack"},
        tolerations=[{"key": "dedicated", "operator": "Equal", "value": "infer", "effect": "NoSchedule"}],
    )
    assert judge(tolerated, state, none).reason == "fits"
    pinned = team_job(1, annotations={REQUIRED: "rack"}, nodeSelector={HOST: "n1"})
    assert judge(pinned, state, none).reason == "never-fits"


def test_queue_label_is_read_from_the_workload_not_the_template(
    sample_state: ClusterState, none_policy: Policy
) -> None:
    obj = job(2, queue=None, labels={QUEUE_LABEL: "tas-user-queue"})
    d = judge(obj, sample_state, none_policy)
    assert (d.queue, d.reason) == (None, "no-tas")


def test_whole_topology_count_respects_the_pods_tolerations() -> None:
    # Every node is tainted; the pods tolerate it. 5 pods cannot fit the 4 nodes at all.
    taint = {"key": "gpu", "value": "yes", "effect": "NoSchedule"}
    objects = [
        *kueue_objects(),
        *(
            node(f"n{i}", {"block": "b", "rack": f"r{i // 2}", "pool": "gpu"}, taints=[taint])
            for i in range(4)
        ),
    ]
    tolerations = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    d = judge(
        team_job(5, annotations={REQUIRED: "rack"}, tolerations=tolerations), build_state(objects), policy([])
    )
    assert (d.allowed, d.reason) == (False, "never-fits")
    assert d.message.endswith(
        "the largest rack holds 2 such pods even when empty (limited by nvidia.com/gpu). "
        "The whole topology holds only 4 such pods even when empty; ask for at most 4."
    )


def test_a_request_that_may_spread_is_denied_by_the_whole_topology(
    sample_state: ClusterState, none_policy: Policy
) -> None:
    # 40 pods x 8 GPUs: the sample cluster has 32 hosts, 2 of them away; empty it holds 32.
    d = judge(job(40, annotations={PREFERRED: BLOCK}), sample_state, none_policy)
    assert (d.allowed, d.reason) == (False, "never-fits")
    assert d.message == (
        'PodSet "main" (40 pods × nvidia.com/gpu: 8) can never be placed: the whole topology holds only '
        f"{ALL_HOLD} such pods even when empty; ask for at most {ALL_HOLD} pods."
    )
