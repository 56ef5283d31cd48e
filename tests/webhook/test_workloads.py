"""PodSets per workload kind: names, counts, order and template paths as Kueue builds them.

Manifests come from ../shared/examples (real upstream files) where one exists; the others are
small realistic manifests shaped by the CRDs in ../shared/crds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from e2e.shared import shared_dir, shared_path
from webhook.model.paths import Key, field_path
from webhook.model.workloads import (
    MAX_COUNT,
    WorkloadPodSets,
    extract,
    is_known_workload,
    unknown_workload_reason,
)
from webhook.wire.errors import BadRequest, InvalidObject

EXAMPLES = shared_dir() / "examples"
GI = 2**30
MI = 2**20


def example(name: str) -> dict[str, Any]:
    path = shared_path("examples", name)
    loaded = yaml.safe_load(path.read_text())
    assert isinstance(loaded, dict)
    return loaded


def load(text: str) -> dict[str, Any]:
    loaded = yaml.safe_load(text)
    assert isinstance(loaded, dict)
    return loaded


def shape(result: WorkloadPodSets | None) -> list[tuple[str, int, tuple[str | int, ...]]]:
    assert result is not None
    return [(ps.name, ps.count, ps.template_path) for ps in result.pod_sets]


def must_extract(obj: Mapping[str, Any], **kwargs: Any) -> WorkloadPodSets:
    result = extract(obj, **kwargs)
    assert result is not None
    return result


def invalid(obj: Mapping[str, Any], **kwargs: Any) -> str:
    with pytest.raises(InvalidObject) as caught:
        extract(obj, **kwargs)
    return str(caught.value)


# --- real upstream manifests -------------------------------------------------------------------


def test_kueue_sample_job() -> None:
    result = must_extract(example("kueue-job-required.yaml"))
    assert shape(result) == [("main", 10, ("spec", "template"))]
    assert dict(result.pod_sets[0].requests) == {"cpu": 1000, "memory": 200 * MI}
    assert result.name == "tas-sample-required"  # generateName stands in before the API server names it
    assert result.pod_sets[0].template["metadata"]["annotations"]


def test_kueue_sample_jobset() -> None:
    result = must_extract(example("kueue-jobset-tas-combined.yaml"))
    assert shape(result) == [("workers", 8, ("spec", "replicatedJobs", 0, "template", "spec", "template"))]
    assert (result.api_version, result.kind, result.name) == (
        "jobset.x-k8s.io/v1alpha2",
        "JobSet",
        "jobset-tas-combined",
    )


def test_kueue_sample_leaderworkerset() -> None:
    result = must_extract(example("kueue-leaderworkerset-tas.yaml"))
    assert shape(result) == [
        ("leader", 1, ("spec", "leaderWorkerTemplate", "leaderTemplate")),
        ("worker", 2, ("spec", "leaderWorkerTemplate", "workerTemplate")),
    ]
    assert result.groups == 2
    assert result.total_pods == 6
    assert dict(result.pod_sets[1].requests) == {"cpu": 200, "nvidia.com/gpu": 1}


@pytest.mark.parametrize("name", ["kueue-pytorchjob.yaml", "pytorchjob-mnist-nccl.yaml"])
def test_upstream_pytorchjobs(name: str) -> None:
    result = must_extract(example(name))
    assert shape(result) == [
        ("master", 1, ("spec", "pytorchReplicaSpecs", "Master", "template")),
        ("worker", 1, ("spec", "pytorchReplicaSpecs", "Worker", "template")),
    ]
    assert result.operator_gang is None


def test_mpi_operator_pi_example_uses_limits_as_requests() -> None:
    result = must_extract(example("mpijob-pi.yaml"))
    assert shape(result) == [
        ("launcher", 1, ("spec", "mpiReplicaSpecs", "Launcher", "template")),
        ("worker", 2, ("spec", "mpiReplicaSpecs", "Worker", "template")),
    ]
    assert dict(result.pod_sets[1].requests) == {"cpu": 1000, "memory": GI}


def test_queue_objects_are_not_workloads() -> None:
    path = shared_path("examples", "kueue-tas-queues.yaml")
    docs = list(yaml.safe_load_all(path.read_text()))
    assert [d["kind"] for d in docs] == ["Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue"]
    for doc in docs:
        assert extract(doc) is None
        assert unknown_workload_reason(doc) is None


# --- Jobs and JobSets --------------------------------------------------------------------------

POD = {"spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}


def job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {**spec, "template": POD},
    }


@pytest.mark.parametrize(
    ("spec", "count"),
    [
        ({}, 1),
        ({"parallelism": 4}, 4),
        ({"parallelism": 5, "completions": 3}, 3),
        ({"completions": 6}, 1),
        ({"parallelism": 0}, 0),
    ],
)
def test_job_count_is_min_of_parallelism_and_completions(spec: dict[str, Any], count: int) -> None:
    assert shape(extract(job(**spec))) == [("main", count, ("spec", "template"))]


JOBSET = """
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: llm, namespace: team-a}
spec:
  replicatedJobs:
  - name: driver
    template:
      spec:
        template:
          spec:
            containers: [{name: d, image: trainer, resources: {requests: {cpu: "2", memory: 4Gi}}}]
  - name: workers
    replicas: 4
    template:
      spec:
        parallelism: 2
        completions: 8
        template:
          spec:
            containers: [{name: w, image: trainer, resources: {limits: {nvidia.com/gpu: 8}}}]
"""


def test_jobset_pod_sets_follow_replicated_jobs() -> None:
    result = must_extract(load(JOBSET))
    assert shape(result) == [
        ("driver", 1, ("spec", "replicatedJobs", 0, "template", "spec", "template")),
        ("workers", 8, ("spec", "replicatedJobs", 1, "template", "spec", "template")),
    ]
    assert result.namespace == "team-a"
    assert dict(result.pod_sets[1].requests) == {"nvidia.com/gpu": 8}


# --- Kubeflow training-operator and MPI --------------------------------------------------------


def kubeflow(kind: str, field: str, replicas: Mapping[str, int | None], **spec: Any) -> dict[str, Any]:
    specs = {
        t: ({"template": POD} if n is None else {"replicas": n, "template": POD}) for t, n in replicas.items()
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {"name": "k"},
        "spec": {field: specs, **spec},
    }


def test_tfjob_follows_kueue_order_not_map_order() -> None:
    obj = kubeflow(
        "TFJob", "tfReplicaSpecs", {"Evaluator": 1, "Worker": 4, "PS": 2, "Master": None, "Chief": 1}
    )
    assert [(n, c) for n, c, _ in shape(extract(obj))] == [
        ("chief", 1),
        ("master", 1),
        ("ps", 2),
        ("worker", 4),
        ("evaluator", 1),
    ]


@pytest.mark.parametrize(
    ("kind", "field", "types"),
    [
        ("XGBoostJob", "xgbReplicaSpecs", ["Master", "Worker"]),
        ("PaddleJob", "paddleReplicaSpecs", ["Master", "Worker"]),
        ("JAXJob", "jaxReplicaSpecs", ["Worker"]),
    ],
)
def test_other_kubeflow_kinds(kind: str, field: str, types: list[str]) -> None:
    result = must_extract(kubeflow(kind, field, {t: 3 for t in reversed(types)}))
    assert shape(result) == [(t.lower(), 3, ("spec", field, t, "template")) for t in types]


def test_mpijob_launcher_is_kept_when_running_as_worker() -> None:
    obj = kubeflow("MPIJob", "mpiReplicaSpecs", {"Worker": 4, "Launcher": 1}, runLauncherAsWorker=True)
    obj["apiVersion"] = "kubeflow.org/v2beta1"
    assert [(n, c) for n, c, _ in shape(extract(obj))] == [("launcher", 1), ("worker", 4)]


@pytest.mark.parametrize(
    ("policy", "scheduler", "gang"),
    [
        ({"minAvailable": 3}, None, "coscheduling"),
        ({"queue": "research"}, None, "volcano"),
        ({}, "volcano", "volcano"),
    ],
)
def test_kubeflow_scheduling_policy_means_operator_gang(
    policy: dict[str, Any], scheduler: str | None, gang: str
) -> None:
    obj = kubeflow(
        "PyTorchJob",
        "pytorchReplicaSpecs",
        {"Master": 1, "Worker": 2},
        runPolicy={"schedulingPolicy": policy},
    )
    if scheduler:
        obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"] = {
            "spec": {**POD["spec"], "schedulerName": scheduler}
        }
    assert must_extract(obj).operator_gang == gang


def test_field_paths_print_map_keys_in_brackets() -> None:
    assert (
        field_path(("spec", "pytorchReplicaSpecs", Key("Worker"), "replicas"))
        == "spec.pytorchReplicaSpecs[Worker].replicas"
    )
    assert field_path(("spec", "replicatedJobs", 2, "name")) == "spec.replicatedJobs[2].name"


# --- LeaderWorkerSet, Ray ----------------------------------------------------------------------


def test_leaderworkerset_without_leader_template_is_one_main_pod_set() -> None:
    obj = example("kueue-leaderworkerset-tas.yaml")
    del obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    del obj["spec"]["replicas"]
    result = must_extract(obj)
    assert shape(result) == [("main", 3, ("spec", "leaderWorkerTemplate", "workerTemplate"))]
    assert result.groups == 1


RAYCLUSTER = """
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: rc, labels: {ray.io/scheduler-name: volcano}}
spec:
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - {name: ray-head, image: rayproject/ray:2.9.0, resources: {requests: {cpu: "2", memory: 8Gi}}}
  workerGroupSpecs:
  - groupName: GPU-Workers
    replicas: 2
    numOfHosts: 4
    rayStartParams: {}
    template:
      spec:
        containers: [{name: w, image: rayproject/ray:2.9.0, resources: {limits: {nvidia.com/gpu: 4}}}]
  - groupName: cpu
    rayStartParams: {}
    template:
      spec:
        containers: [{name: w, image: rayproject/ray:2.9.0, resources: {requests: {cpu: "8"}}}]
"""


def test_raycluster_head_then_worker_groups() -> None:
    result = must_extract(load(RAYCLUSTER))
    assert shape(result) == [
        ("head", 1, ("spec", "headGroupSpec", "template")),
        ("gpu-workers", 8, ("spec", "workerGroupSpecs", 0, "template")),
        ("cpu", 1, ("spec", "workerGroupSpecs", 1, "template")),
    ]
    assert result.operator_gang == "volcano"


def rayjob(**spec: Any) -> dict[str, Any]:
    cluster = load(RAYCLUSTER)["spec"]
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "rj"},
        "spec": {"rayClusterSpec": cluster, **spec},
    }


def test_rayjob_default_submitter_is_kuberays() -> None:
    result = must_extract(rayjob(entrypoint="python train.py"))
    assert [n for n, _, _ in shape(result)] == ["head", "gpu-workers", "cpu", "submitter"]
    submitter = result.pod_sets[-1]
    assert submitter.synthesized
    assert submitter.template_path == ("spec", "submitterPodTemplate")
    assert dict(submitter.requests) == {"cpu": 500, "memory": 200 * MI}
    assert submitter.template["spec"]["containers"][0]["image"] == "rayproject/ray:2.9.0"


def test_rayjob_uses_its_own_submitter_template() -> None:
    template = {
        "spec": {"containers": [{"name": "s", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}
    }
    submitter = must_extract(rayjob(submitterPodTemplate=template)).pod_sets[-1]
    assert (submitter.synthesized, dict(submitter.requests)) == (False, {"cpu": 100})


@pytest.mark.parametrize("mode", ["HTTPMode", "InteractiveMode", "SidecarMode"])
def test_rayjob_without_submitter_job(mode: str) -> None:
    assert [n for n, _, _ in shape(extract(rayjob(submissionMode=mode)))] == ["head", "gpu-workers", "cpu"]


def test_rayjob_on_existing_cluster_is_not_managed() -> None:
    obj = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "rj"},
        "spec": {"clusterSelector": {"ray.io/cluster": "c"}},
    }
    result = must_extract(obj)
    assert result.pod_sets == ()
    assert result.unresolved is not None and "clusterSelector" in result.unresolved


# --- Pods --------------------------------------------------------------------------------------


def pod(
    labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, **meta: Any
) -> dict[str, Any]:
    metadata = {"name": "p", "labels": labels or {}, "annotations": annotations or {}, **meta}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, **POD}


def test_plain_pod_is_its_own_template() -> None:
    obj = pod()
    result = must_extract(obj, namespace="from-request")
    assert shape(result) == [("main", 1, ())]
    assert result.pod_sets[0].template is obj
    assert result.namespace == "from-request"


def test_pod_group_counts_its_declared_total() -> None:
    group = {"kueue.x-k8s.io/pod-group-name": "g"}
    assert shape(extract(pod(group, {"kueue.x-k8s.io/pod-group-total-count": "16"}))) == [("main", 16, ())]
    hashed = {"kueue.x-k8s.io/pod-group-total-count": "2", "kueue.x-k8s.io/role-hash": "a1b2c3d4"}
    assert shape(extract(pod(group, hashed))) == [("a1b2c3d4", 2, ())]


@pytest.mark.parametrize(
    ("annotations", "fragment"),
    [
        ({}, "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: Required value"),
        ({"kueue.x-k8s.io/pod-group-total-count": "many"}, '"many": must be an integer'),
        ({"kueue.x-k8s.io/pod-group-total-count": "0"}, "must be between 1 and"),
        # Kueue reads it with strconv.Atoi: no blanks, no digit separators (Python's int takes both)
        ({"kueue.x-k8s.io/pod-group-total-count": " 16"}, '" 16": must be an integer'),
        ({"kueue.x-k8s.io/pod-group-total-count": "1_6"}, '"1_6": must be an integer'),
    ],
)
def test_pod_group_needs_a_valid_total(annotations: dict[str, str], fragment: str) -> None:
    assert fragment in invalid(pod({"kueue.x-k8s.io/pod-group-name": "g"}, annotations))


def test_pod_controlled_by_a_known_workload_belongs_to_it() -> None:
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}
    assert extract(pod(ownerReferences=[owner])) is None
    owner["kind"] = "ReplicaSet"
    owner["apiVersion"] = "apps/v1"
    assert extract(pod(ownerReferences=[owner])) is not None


# --- TrainJob ----------------------------------------------------------------------------------

TORCH_RUNTIME = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: torch-distributed}
spec:
  mlPolicy: {numNodes: 1, torch: {}}
  podGroupPolicy: {coscheduling: {scheduleTimeoutSeconds: 120}}
  template:
    spec:
      replicatedJobs:
      - name: dataset-initializer
        replicas: 3
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}}
          spec:
            template:
              spec:
                containers: [{name: dataset-initializer, image: init, resources: {requests: {cpu: "2"}}}]
      - name: node
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
          spec:
            template:
              spec:
                containers: [{name: node, image: pytorch/pytorch, resources: {requests: {cpu: "1"}}}]
"""

MPI_RUNTIME = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata: {name: deepspeed, namespace: ml}
spec:
  mlPolicy: {numNodes: 1, mpi: {runLauncherAsNode: true}}
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          spec:
            template:
              spec:
                containers: [{name: node, image: deepspeed}]
      - name: launcher
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
          spec:
            template:
              spec:
                containers: [{name: node, image: deepspeed}]
"""

RUNTIMES = {
    ("ClusterTrainingRuntime", "", "torch-distributed"): load(TORCH_RUNTIME),
    ("TrainingRuntime", "ml", "deepspeed"): load(MPI_RUNTIME),
}


def trainjob(runtime_ref: dict[str, str], **trainer: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"runtimeRef": runtime_ref}
    if trainer:
        spec["trainer"] = trainer
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "t", "namespace": "ml"},
        "spec": spec,
    }


def test_trainjob_takes_its_runtimes_jobset() -> None:
    gpus = {"limits": {"nvidia.com/gpu": 8}, "requests": {"cpu": "16"}}
    result = must_extract(
        trainjob({"name": "torch-distributed"}, numNodes=4, resourcesPerNode=gpus), runtimes=RUNTIMES
    )
    jobs = ("spec", "template", "spec", "replicatedJobs")
    assert shape(result) == [
        ("dataset-initializer", 1, (*jobs, 0, "template", "spec", "template")),
        ("node", 4, (*jobs, 1, "template", "spec", "template")),
    ]
    assert dict(result.pod_sets[1].requests) == {"cpu": 16000, "nvidia.com/gpu": 8}
    assert result.runtime == ("ClusterTrainingRuntime", "", "torch-distributed")
    assert result.operator_gang == "coscheduling"
    # The runtime object itself is left untouched.
    container = RUNTIMES[("ClusterTrainingRuntime", "", "torch-distributed")]["spec"]["template"]["spec"]
    assert container["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0][
        "resources"
    ] == {"requests": {"cpu": "1"}}


def test_trainjob_without_num_nodes_uses_the_runtime_default() -> None:
    result = must_extract(trainjob({"name": "torch-distributed"}), runtimes=RUNTIMES)
    assert [(n, c) for n, c, _ in shape(result)] == [("dataset-initializer", 1), ("node", 1)]
    assert dict(result.pod_sets[1].requests) == {"cpu": 1000}


def test_trainjob_mpi_launcher_counts_as_a_node() -> None:
    ref = {"name": "deepspeed", "kind": "TrainingRuntime"}
    result = must_extract(
        trainjob(ref, numNodes=4, resourcesPerNode={"requests": {"cpu": "3"}}), runtimes=RUNTIMES
    )
    assert [(n, c) for n, c, _ in shape(result)] == [("node", 3), ("launcher", 1)]
    assert [dict(ps.requests) for ps in result.pod_sets] == [{"cpu": 3000}, {"cpu": 3000}]
    assert result.operator_gang is None


def test_trainjob_runtime_patches_reach_the_pod_template() -> None:
    obj = trainjob({"name": "torch-distributed"})
    pod_patch = {
        "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": "rack"}},
        "spec": {"nodeSelector": {"pool": "a100"}},
    }
    job_patch = {"name": "node", "template": {"spec": {"template": pod_patch}}}
    obj["spec"]["runtimePatches"] = [
        {"manager": "me", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [job_patch]}}}}
    ]
    template = must_extract(obj, runtimes=RUNTIMES).pod_sets[1].template
    assert template["metadata"]["annotations"] == {"kueue.x-k8s.io/podset-required-topology": "rack"}
    assert template["spec"]["nodeSelector"] == {"pool": "a100"}


@pytest.mark.parametrize(
    ("ref", "fragment"),
    [
        ({"name": "missing"}, "ClusterTrainingRuntime missing is not known"),
        ({"name": "deepspeed"}, "ClusterTrainingRuntime deepspeed is not known"),
        ({"name": "x", "kind": "Runtime"}, "is not a Trainer runtime"),
        ({"name": "x", "apiGroup": "example.com"}, "is not a Trainer runtime"),
    ],
)
def test_trainjob_with_unknown_runtime_is_unresolved(ref: dict[str, str], fragment: str) -> None:
    result = must_extract(trainjob(ref), runtimes=RUNTIMES)
    assert result.pod_sets == ()
    assert result.unresolved is not None and fragment in result.unresolved


def test_trainjob_with_malformed_runtime_is_unresolved() -> None:
    broken = {
        ("ClusterTrainingRuntime", "", "b"): {
            "spec": {"template": {"spec": {"replicatedJobs": [{"name": "x"}]}}}
        }
    }
    result = must_extract(trainjob({"name": "b"}), runtimes=broken)
    assert (
        result.unresolved is not None
        and "is malformed" in result.unresolved
        and "Required value" in result.unresolved
    )


# --- malformed objects -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "fragment"),
    [
        (job(parallelism="abc"), "spec.parallelism: Invalid value: 'abc': must be an integer"),
        (job(parallelism=-2), "spec.parallelism: Invalid value: -2: must be greater than or equal to 0"),
        (job(parallelism=MAX_COUNT + 1), "not a plausible workload"),
        (job(parallelism=True), "must be an integer"),
        ({"apiVersion": "batch/v1", "kind": "Job", "spec": {}}, "spec.template: Required value"),
        (
            {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"metadata": {}}}},
            "spec.template.spec: Required value",
        ),
        (
            {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": []}},
            "spec.template: Invalid value: must be an object",
        ),
        (
            kubeflow("PyTorchJob", "pytorchReplicaSpecs", {"Worker": -1}),
            "spec.pytorchReplicaSpecs[Worker].replicas: Invalid value: -1",
        ),
        (
            kubeflow("PyTorchJob", "pytorchReplicaSpecs", {"worker": 1}),
            "unsupported replica type(s) ['worker']",
        ),
        (
            {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "spec": {}},
            "spec.pytorchReplicaSpecs: Required value",
        ),
        (
            {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "spec": {"replicatedJobs": {}}},
            "spec.replicatedJobs: Invalid value: must be a list",
        ),
    ],
)
def test_malformed_objects_name_the_field(obj: dict[str, Any], fragment: str) -> None:
    assert fragment in invalid(obj)


def test_jobset_gang_product_is_bounded() -> None:
    obj = load(JOBSET)
    obj["spec"]["replicatedJobs"][1]["replicas"] = 1000
    obj["spec"]["replicatedJobs"][1]["template"]["spec"].update(parallelism=5000, completions=5000)
    assert "spec.replicatedJobs[1].replicas: Invalid value: 5000000" in invalid(obj)


def test_bad_request_when_the_object_is_not_an_object() -> None:
    with pytest.raises(BadRequest):
        extract(["not", "an", "object"])  # type: ignore[arg-type]


def test_lws_rejects_zero_size_and_bad_requests_inside_templates() -> None:
    obj = example("kueue-leaderworkerset-tas.yaml")
    obj["spec"]["leaderWorkerTemplate"]["size"] = 0
    assert "spec.leaderWorkerTemplate.size: Invalid value: 0" in invalid(obj)
    obj = example("kueue-leaderworkerset-tas.yaml")
    obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["resources"]["requests"][
        "cpu"
    ] = "2 cores"
    assert (
        "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].resources.requests.cpu: Invalid value"
        in invalid(obj)
    )


# --- what is and is not a workload -------------------------------------------------------------


def test_known_kinds_match_exact_api_versions() -> None:
    assert is_known_workload("batch/v1", "Job")
    assert is_known_workload("kubeflow.org/v2beta1", "MPIJob")
    assert not is_known_workload("kubeflow.org/v1", "MPIJob")
    assert not is_known_workload("apps/v1", "Deployment")


@pytest.mark.parametrize(
    ("obj", "fragment"),
    [
        ({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}}, None),
        ({"apiVersion": "v1", "kind": "Service", "spec": {"ports": [{"port": 80}]}}, None),
        (
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "ClusterTrainingRuntime",
                "spec": load(TORCH_RUNTIME)["spec"],
            },
            None,
        ),
        (
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "spec": {"podSets": [{"template": POD}]},
            },
            None,
        ),
        (
            {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": POD}},
            "pod template at spec.template",
        ),
        (
            {"apiVersion": "example.com/v1", "kind": "Thing", "spec": {"roles": [{"pod": POD}]}},
            "pod template at spec.roles[0].pod",
        ),
        (
            {"apiVersion": "kubeflow.org/v1", "kind": "MPIJob", "spec": {}},
            "not a version tasgate reads (it reads kubeflow.org/v2beta1)",
        ),
        (
            {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment", "spec": {}},
            "group kubeflow.org, which holds workloads",
        ),
        ({"apiVersion": "foo.x-k8s.io/v1", "kind": "Bar", "spec": {}}, "group foo.x-k8s.io"),
        ({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine", "spec": {}}, None),
    ],
)
def test_unknown_kinds_that_look_like_workloads(obj: dict[str, Any], fragment: str | None) -> None:
    assert extract(obj) is None
    reason = unknown_workload_reason(obj)
    if fragment is None:
        assert reason is None
    else:
        assert reason is not None and fragment in reason


def test_more_podsets_than_a_kueue_workload_holds_is_refused_before_reading_them() -> None:
    """Kueue's Workload holds at most 18 PodSets; a 10,000-job JobSet is refused at once."""
    template = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    jobs = [{"name": f"j{i}", "replicas": 1, "template": template} for i in range(10_000)]
    obj = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "big"},
        "spec": {"replicatedJobs": jobs},
    }
    with pytest.raises(InvalidObject) as caught:
        extract(obj)
    assert str(caught.value) == (
        "spec.replicatedJobs: Too many: 10000 entries: a Kueue Workload holds at most 18 PodSets, "
        "so Kueue could never admit it"
    )
