"""`tasgate check` through the installed console script: outputs, inputs, exit codes, errors."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.webhook.conftest import (
    GPU,
    HOST,
    MANIFESTS,
    RACK,
    REQUIRED,
    Run,
    job,
    kueue_objects,
    manifest,
    node,
    rack_cluster,
    running_pod,
    tasgate,
)

EXIT_OK, EXIT_DENIED, EXIT_BAD_INPUT = 0, 1, 2
TOP_KEYS = {
    "source",
    "outcome",
    "apiVersion",
    "kind",
    "namespace",
    "name",
    "allowed",
    "reason",
    "message",
    "warnings",
    "patch",
    "auditAnnotations",
    "podGroups",
    "topology",
    "flavors",
    "queue",
    "clusterQueue",
    "quotaNow",
    "generation",
    "podSets",
}
POD_SET_KEYS = {
    "name",
    "count",
    "requests",
    "topologyRequest",
    "flavor",
    "judged",
    "fitsNow",
    "topologyFitsNow",
    "quotaNow",
    "placedWith",
    "minCount",
    "admittedNow",
    "admissible",
    "now",
    "whenEmpty",
    "levels",
}
PLACEMENT_KEYS = {"fits", "maxPods", "message", "assignmentLevels", "assignment"}


def check_json(*args: str, stdin: str | None = None) -> tuple[int, list[dict[str, Any]]]:
    """Exit code and the results of the versioned report."""
    run = tasgate("check", "-o", "json", *args, stdin=stdin)
    assert run.code in (EXIT_OK, EXIT_DENIED), run.err
    assert run.err == ""
    report = json.loads(run.out)
    assert (report["apiVersion"], report["kind"]) == ("tasgate.io/v1", "CheckReport")
    assert isinstance(report["results"], list)
    return run.code, report["results"]


def write(path: Path, *docs: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump_all(list(docs), sort_keys=False))
    return path


def no_traceback(run: Run) -> None:
    assert "Traceback" not in run.err and "Traceback" not in run.out


# --- output --------------------------------------------------------------------------------------


def test_json_output_shape() -> None:
    code, out = check_json("-f", str(MANIFESTS / "pytorchjob-waits.yaml"))
    assert code == EXIT_OK
    (d,) = out
    assert set(d) == TOP_KEYS
    assert (d["kind"], d["name"], d["allowed"], d["reason"]) == (
        "PyTorchJob",
        "llama-finetune",
        True,
        "waits",
    )
    assert (d["topology"], d["queue"], d["clusterQueue"]) == ("default", "user-queue", "tas-cluster-queue")
    assert (d["auditAnnotations"]["decision"], d["auditAnnotations"]["reason"]) == ("allow", "waits")
    assert (d["source"], d["outcome"]) == (f"{MANIFESTS / 'pytorchjob-waits.yaml'} (document 1)", "waits")
    assert [g["spec"]["minMember"] for g in d["podGroups"]] == [16]
    assert all(op["op"] == "add" for op in d["patch"])
    master, worker = d["podSets"]
    for ps in (master, worker):
        assert set(ps) == POD_SET_KEYS
        assert set(ps["now"]) == PLACEMENT_KEYS and set(ps["whenEmpty"]) == PLACEMENT_KEYS
        assert ps["requests"] == {"cpu": "16", "memory": "256Gi", GPU: "8", "pods": "1"}
        assert ps["flavor"] == "tas-flavor"
        assert ps["topologyRequest"]["mode"] == "required"
        assert ps["topologyRequest"]["injected"] is False
    assert (master["name"], master["count"], worker["name"], worker["count"]) == ("master", 1, "worker", 15)
    assert worker["whenEmpty"]["fits"] is True and worker["whenEmpty"]["maxPods"] == 15
    assert worker["whenEmpty"]["assignmentLevels"] == [HOST]
    assert sum(a["count"] for a in worker["whenEmpty"]["assignment"]) == 15
    assert worker["now"]["fits"] is False and worker["now"]["maxPods"] == 10
    assert "allows to fit only 10 out of 15 pod(s)" in worker["now"]["message"]
    assert worker["now"]["assignment"] == []
    levels = {row["level"]: row for row in worker["levels"]}
    assert list(levels) == ["cloud.provider.com/topology-block", RACK, HOST]
    assert {k: (v["nowMaxPods"], v["whenEmptyMaxPods"]) for k, v in levels.items()} == {
        "cloud.provider.com/topology-block": (10, 16),
        RACK: (4, 4),
        HOST: (1, 1),
    }


def test_text_output() -> None:
    run = tasgate("check", "-f", str(MANIFESTS / "jobset-never-fits.yaml"))
    assert run.code == EXIT_DENIED
    lines = run.out.splitlines()
    source = f"{MANIFESTS / 'jobset-never-fits.yaml'} (document 1)"
    assert lines[0] == f"JobSet default/llm-pretrain: DENIED (never-fits)  [{source}]"
    assert (
        lines[1]
        == "  queue tas-user-queue → ClusterQueue tas-cluster-queue · flavor tas-flavor · topology default"
    )
    assert lines[2].startswith('  PodSet "workers" (8 pods × nvidia.com/gpu: 8) can never fit one')
    assert "  PodSet workers: 8 pods, required rack; per pod cpu 32, memory 256Gi, nvidia.com/gpu 8" in lines
    assert "    fits now: no · fits when empty: no" in lines
    assert "    rack           4           4  0 of 8" in lines
    assert lines[-1] == "checked 1: 0 admitted, 0 waits, 1 denied; 0 not checked; 0 errors"


def test_text_output_of_an_allowed_gang() -> None:
    run = tasgate("check", "-f", str(MANIFESTS / "lws-one-group.yaml"))
    assert run.code == EXIT_OK
    assert run.out.splitlines()[0].startswith("LeaderWorkerSet default/vllm-serving: ADMITTED (fits)  [")
    assert (
        "  PodSet leader: 1 pod, required rack, injected; per pod cpu 8, memory 64Gi, nvidia.com/gpu 8"
        in run.out
    )
    (patch,) = [line for line in run.out.splitlines() if line.startswith("  patch: ")]
    assert patch.startswith("  patch: 4 ops adding "), patch
    assert "kueue.x-k8s.io/podset-required-topology" in patch and "scheduling.x-k8s.io/pod-group" in patch
    assert "  podgroup: PodGroup vllm-serving minMember=4" in run.out


def test_nothing_checked_is_an_error_for_a_pipeline() -> None:
    run = tasgate("check", "-f", str(MANIFESTS / "configmap.yaml"))
    assert (run.code, run.out) == (
        EXIT_BAD_INPUT,
        "checked 0: 0 admitted, 0 waits, 0 denied; 0 not checked; 0 errors\n",
    )
    assert run.err.startswith("tasgate: error: nothing to check: 1 object read (ConfigMap), not a workload")


# --- inputs --------------------------------------------------------------------------------------


def test_multi_document_file() -> None:
    code, out = check_json("-f", str(MANIFESTS / "pod-group.yaml"), "-f", str(MANIFESTS / "configmap.yaml"))
    assert code == EXIT_OK
    assert [(d["kind"], d["name"]) for d in out] == [("Pod", "sample-pod-0"), ("Pod", "sample-pod-1")]


def test_kind_list_is_flattened(tmp_path: Path) -> None:
    items = [manifest("job-required.yaml"), manifest("configmap.yaml"), manifest("jobset-never-fits.yaml")]
    path = write(tmp_path / "list.yaml", {"apiVersion": "v1", "kind": "List", "items": items})
    code, out = check_json("-f", str(path))
    assert code == EXIT_DENIED
    assert [(d["kind"], d["allowed"]) for d in out] == [("Job", True), ("JobSet", False)]


def test_directory_is_read_recursively_in_order(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    shutil.copy(MANIFESTS / "tfjob.yaml", tmp_path / "b.yaml")
    shutil.copy(MANIFESTS / "mpijob-pi.yaml", tmp_path / "sub" / "c.yml")
    (tmp_path / "a.json").write_text(json.dumps(manifest("pod-plain.yaml")))
    (tmp_path / "notes.txt").write_text("not: [yaml")
    code, out = check_json("-f", str(tmp_path))
    assert code == EXIT_OK
    assert [d["kind"] for d in out] == ["Pod", "TFJob", "MPIJob"]
    assert check_json("-f", str(tmp_path), "-R") == (code, out), "kubectl's -R is the default"
    _, top = check_json("-f", str(tmp_path), "--no-recursive")
    assert [d["kind"] for d in top] == ["Pod", "TFJob"]
    (tmp_path / "only" / "deeper").mkdir(parents=True)
    shutil.copy(MANIFESTS / "tfjob.yaml", tmp_path / "only" / "deeper" / "sub.yaml")
    run = tasgate("check", "-f", str(tmp_path / "only"), "--no-recursive")
    assert run.code == EXIT_BAD_INPUT and "its subdirectories are not read" in run.out


def test_stdin() -> None:
    text = (MANIFESTS / "jobset-never-fits.yaml").read_text()
    code, out = check_json("-f", "-", stdin=text)
    assert code == EXIT_DENIED
    assert out[0]["reason"] == "never-fits"


def test_namespace_flag_applies_to_objects_without_one() -> None:
    obj = manifest("jobset-never-fits.yaml")
    del obj["metadata"]["namespace"]
    code, out = check_json(
        "-f", "-", "-f", str(MANIFESTS / "tfjob.yaml"), "-n", "kube-system", stdin=yaml.safe_dump(obj)
    )
    assert (code, out[0]["namespace"], out[0]["reason"]) == (EXIT_OK, "kube-system", "exempt")
    assert out[0]["outcome"] == "not-checked"


def test_unknown_kinds_are_not_checked_and_say_so() -> None:
    code, out = check_json("-f", str(MANIFESTS / "unknown-kind.yaml"))
    assert code == EXIT_OK
    (d,) = out
    assert d["outcome"] == "not-checked"
    failing = tasgate("check", "-f", str(MANIFESTS / "unknown-kind.yaml"), "--fail-on", "denied,unchecked")
    assert failing.code == EXIT_DENIED and failing.out.splitlines()[-1].endswith("1 not checked; 0 errors")
    assert (d["allowed"], d["reason"], d["patch"], d["podSets"]) == (True, "unknown-kind", [], [])
    assert d["warnings"][0].startswith("tasgate does not know TrainingThing")


def test_policy_none() -> None:
    code, out = check_json("-f", str(MANIFESTS / "lws-unannotated.yaml"), "--policy", "none")
    assert code == EXIT_OK
    assert (out[0]["patch"], out[0]["podGroups"]) == ([], [])
    assert [ps["topologyRequest"]["mode"] for ps in out[0]["podSets"]] == ["implied", "implied"]


def test_policy_file(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(
        "apiVersion: tasgate.io/v1alpha1\nkind: AdmissionPolicy\nspec:\n  rules:\n"
        "  - inject: {mode: preferred, level: kubernetes.io/hostname}\n    gang: {backend: volcano}\n"
    )
    code, out = check_json("-f", str(MANIFESTS / "tfjob.yaml"), "--policy", str(path))
    assert code == EXIT_OK
    assert {ps["topologyRequest"]["mode"] for ps in out[0]["podSets"]} == {"preferred"}
    assert out[0]["podGroups"][0]["apiVersion"] == "scheduling.volcano.sh/v1beta1"


# --- cluster dumps -------------------------------------------------------------------------------


def small_dump(tmp_path: Path) -> Path:
    """One rack of 2 hosts (one half busy, one finished pod, one unbound pod) and Kueue objects."""
    objects = [
        *kueue_objects(levels=("rack", HOST)),
        *rack_cluster(racks=1, hosts=2),
        running_pod("busy", "n1-1", gpus=4),
        running_pod("done", "n1-2", gpus=8, phase="Succeeded"),
        running_pod("pending", None, gpus=8, phase="Pending"),
    ]
    nodes = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [o for o in objects if o["kind"] in ("Node", "Pod")],
    }
    (tmp_path / "dump").mkdir()
    write(tmp_path / "dump" / "nodes.yaml", nodes)
    write(tmp_path / "dump" / "kueue.yaml", *[o for o in objects if o["kind"] not in ("Node", "Pod")])
    return tmp_path / "dump"


@pytest.mark.parametrize(
    ("pods", "reason", "code"), [(1, "fits", EXIT_OK), (2, "waits", EXIT_OK), (3, "never-fits", EXIT_DENIED)]
)
def test_cluster_dump(tmp_path: Path, pods: int, reason: str, code: int) -> None:
    dump = small_dump(tmp_path)
    obj = job(pods, queue="q", namespace="team", annotations={REQUIRED: "rack"})
    got, out = check_json("-f", "-", "--cluster", str(dump), "--policy", "none", stdin=yaml.safe_dump(obj))
    assert (got, out[0]["reason"], out[0]["topology"]) == (code, reason, "topo")
    main = out[0]["podSets"][0]
    assert (main["now"]["maxPods"], main["whenEmpty"]["maxPods"]) == (min(pods, 1), min(pods, 2))


def test_cluster_dump_files_can_be_given_separately(tmp_path: Path) -> None:
    dump = small_dump(tmp_path)
    obj = job(2, queue="q", namespace="team", annotations={REQUIRED: "rack"})
    args = ["--cluster", str(dump / "nodes.yaml"), "--cluster", str(dump / "kueue.yaml")]
    code, out = check_json("-f", "-", *args, stdin=yaml.safe_dump(obj))
    assert (code, out[0]["reason"]) == (EXIT_OK, "waits")


def test_sample_cluster_fed_back_gives_the_same_verdicts(tmp_path: Path) -> None:
    dump = tmp_path / "sample.yaml"
    printed = tasgate("sample-cluster")
    assert printed.code == EXIT_OK
    dump.write_text(printed.out)
    kinds = [d["kind"] for d in yaml.safe_load_all(printed.out)]
    assert kinds.count("Node") == 32 and "LocalQueue" in kinds
    _, default = check_json("-f", str(MANIFESTS))
    _, fed = check_json("-f", str(MANIFESTS), "--cluster", str(dump))
    assert len(default) >= 15
    strip = [{k: v for k, v in d.items() if k != "generation"} for d in default]
    assert [{k: v for k, v in d.items() if k != "generation"} for d in fed] == strip


def test_bad_objects_in_a_dump_are_left_out_named_and_the_rest_is_checked(tmp_path: Path) -> None:
    objects = list(yaml.safe_load_all(tasgate("sample-cluster").out))
    (cq,) = [o for o in objects if o["kind"] == "ClusterQueue"]
    healthy = copy.deepcopy(cq)
    healthy["metadata"]["name"] = "healthy-cq"
    (user_queue,) = [o for o in objects if o["metadata"]["name"] == "user-queue"]
    user_queue["spec"]["clusterQueue"] = "healthy-cq"
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "lots"
    broken = node("gpu-7", {"rack": "r"}, cpu="lots")
    path = write(tmp_path / "cluster.yaml", *objects, healthy, broken)
    job_file = str(MANIFESTS / "job-required.yaml")
    other = str(MANIFESTS / "pytorchjob-simple.yaml")  # on user-queue
    run = tasgate("check", "-f", job_file, "-f", other, "--cluster", str(path))
    assert run.code == EXIT_OK, "a left-out object is not an input error"
    assert run.err.splitlines() == [
        'tasgate: warning: ClusterQueue "tas-cluster-queue" left out of the cluster state: '
        "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: "
        'Invalid value: "lots": must start with a number, as in 500m or 2Gi',
        'tasgate: warning: Node "gpu-7" left out of the cluster state: status.allocatable[cpu]: '
        'Invalid value: "lots": must start with a number, as in 500m or 2Gi',
    ]
    assert "Job default/tas-sample-required: NOT CHECKED (object-rejected)" in run.out
    assert 'not checked: ClusterQueue "tas-cluster-queue" is left out' in run.out
    assert "PyTorchJob default/pytorch-simple: ADMITTED (fits)" in run.out, "other queues are judged"
    no_traceback(run)
    unchecked = tasgate("check", "-f", job_file, "--cluster", str(path), "--fail-on", "unchecked")
    assert unchecked.code == EXIT_DENIED


def test_a_one_exa_cpu_quota_is_unlimited_as_in_kueue(tmp_path: Path) -> None:
    objects = list(yaml.safe_load_all(tasgate("sample-cluster").out))
    (cq,) = [o for o in objects if o["kind"] == "ClusterQueue"]
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "1E"
    run = tasgate(
        "check",
        "-f",
        str(MANIFESTS / "job-required.yaml"),
        "--cluster",
        str(write(tmp_path / "c.yaml", *objects)),
    )
    assert (run.code, run.err) == (EXIT_OK, "")
    assert "Job default/tas-sample-required: ADMITTED (fits)" in run.out


def sample_without(*kinds: str) -> list[dict[str, Any]]:
    return [o for o in yaml.safe_load_all(tasgate("sample-cluster").out) if o["kind"] not in kinds]


@pytest.mark.parametrize("kept", [(), ("Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue")])
def test_a_state_without_nodes_is_an_error(tmp_path: Path, kept: tuple[str, ...]) -> None:
    """Every verdict would read "never fits", the dump's fault and not the workloads'."""
    objects = [o for o in sample_without() if o["kind"] in kept]
    path = write(tmp_path / "state.yaml", *objects) if objects else tmp_path / "state.yaml"
    path.touch()
    run = tasgate("check", "-f", str(MANIFESTS / "job-required.yaml"), "--state", str(path))
    assert (run.code, run.out) == (EXIT_BAD_INPUT, "")
    assert run.err == (
        f"tasgate: error: {path}: the cluster state has no nodes, so nothing can be placed; give them "
        "too (`kubectl get nodes,pods,namespaces,priorityclasses,limitranges,runtimeclasses -A -o yaml`)\n"
    )


def test_a_state_without_kueue_objects_says_so_and_checks_nothing(tmp_path: Path) -> None:
    path = write(
        tmp_path / "nodes.yaml", *sample_without("Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue")
    )
    no_queue = job(2, queue=None)
    queued = str(MANIFESTS / "job-required.yaml")
    run = tasgate("check", "-f", "-", "-f", queued, "--state", str(path), stdin=yaml.safe_dump(no_queue))
    assert run.code == EXIT_OK, "not checked fails a run only when asked (--fail-on unchecked)"
    assert run.err.startswith(
        f"tasgate: warning: {path}: the cluster state has no Topology, ResourceFlavor, "
    )
    assert run.out.splitlines() == [
        "Job default/train: NOT CHECKED (no-tas)  [<stdin> (document 1)]",
        '  no TAS: it names no Kueue queue, and the policy\'s default Topology "default" is not in the state',
        "  PodSet main: 2 pods, no TAS annotation; per pod cpu 4, memory 32Gi, nvidia.com/gpu 8",
        "    not checked: this is what Kueue will be asked for",  # what Kueue will be asked for (18.7)
        f"Job default/tas-sample-required: NOT CHECKED (kueue-config)  [{queued} (document 1)]",
        "  queue tas-user-queue",
        '  warning: not checked: LocalQueue "default/tas-user-queue" not found',
        "  PodSet main: 10 pods, required rack; per pod cpu 1, memory 200Mi",
        "    not checked: this is what Kueue will be asked for",
        "checked 0: 0 admitted, 0 waits, 0 denied; 2 not checked; 0 errors",
    ]
    strict = tasgate("check", "-f", queued, "--state", str(path), "--fail-on", "unchecked")
    assert strict.code == EXIT_DENIED


def test_no_tas_says_why(tmp_path: Path) -> None:
    objects = sample_without()
    (flavor,) = [o for o in objects if o["kind"] == "ResourceFlavor"]
    del flavor["spec"]["topologyName"]
    path = write(tmp_path / "state.yaml", *objects)
    code, out = check_json("-f", str(MANIFESTS / "job-required.yaml"), "--state", str(path))
    assert (code, out[0]["outcome"], out[0]["reason"]) == (EXIT_OK, "not-checked", "no-tas")
    assert out[0]["message"] == 'no TAS: ClusterQueue "tas-cluster-queue" has no flavor with a topologyName'
    _, none = check_json("-f", "-", "--policy", "none", stdin=yaml.safe_dump(job(2, queue=None)))
    assert none[0]["message"] == "no TAS: it names no Kueue queue, and the policy has no defaultTopology"


def test_files_and_a_cluster_together_is_a_usage_error(tmp_path: Path) -> None:
    run = tasgate("check", "-f", str(MANIFESTS / "tfjob.yaml"), "--state", "x.yaml", "--live")
    assert run.code == EXIT_BAD_INPUT
    assert "give either --state files or a cluster (--live, --kubeconfig, --context), not both" in run.err


# --- help ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "description", "defaults"),
    [
        (
            "check",
            "judge workload manifests offline",
            ["(default: text)", "(default: denied)", "-R, --recursive process the directory"],
        ),
        ("map", "the topology: free accelerators per domain", ["(default: text)", "(default: default)"]),
        ("test", "run policy test suites", []),
        ("status", "every tracked gang of a live cluster", ["(default: table)", "default: $KUBECONFIG"]),
        ("version", "the client version, its build", ["(default: text)"]),
        ("sample-cluster", "print the embedded sample cluster", []),
        ("serve", "run the admission webhook over HTTPS", ["(default: 8443)", "(default: allow)"]),
        ("certs", "create a CA and a serving certificate", ["(default: 365)"]),
    ],
)
def test_every_command_has_a_description_and_shows_its_defaults(
    command: str, description: str, defaults: list[str]
) -> None:
    run = tasgate(command, "--help")
    assert run.code == EXIT_OK
    text = " ".join(run.out.split())  # argparse wraps to the terminal's width
    assert description in text
    for default in defaults:
        assert default in text


def test_status_takes_either_a_namespace_or_all() -> None:
    run = tasgate("status", "-n", "team", "-A")
    assert run.code == EXIT_BAD_INPUT and "not allowed with argument" in run.err


# --- errors and exit codes -----------------------------------------------------------------------


def test_bad_yaml_names_the_file_and_document(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text((MANIFESTS / "configmap.yaml").read_text() + "---\nkind: Job\nspec: [unclosed\n")
    run = tasgate("check", "-f", str(path), "-f", str(MANIFESTS / "tfjob.yaml"))
    assert run.code == EXIT_BAD_INPUT
    # Said where an editor jumps to it, never as PyYAML names the string it parsed.
    end = len(path.read_text().splitlines()) + 1  # PyYAML finds the flow unclosed at the end
    assert f"ERROR {path}\n  {path}:{end}:1: not valid YAML (document 2): did not find expected" in run.out
    assert "<unicode string>" not in run.out
    assert "TFJob default/tf-dist: ADMITTED (fits)" in run.out, "the rest of the input is still checked"
    assert run.out.splitlines()[-1].endswith("; 1 error")
    no_traceback(run)


def test_a_document_nested_too_deep_is_refused_as_a_review_would_be(tmp_path: Path) -> None:
    """Every later walk of a 500-deep value (the patch, ``-o patched``) would recurse past
    Python's limit: refused when read, as the server refuses such a body, naming the document."""
    deep: list[object] = []
    for _ in range(500):
        deep = [deep]
    pod = {"containers": [{"name": "c", "image": "i"}], "x": deep}
    obj = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "deep", "namespace": "default"},
           "spec": {"template": {"spec": pod}}}  # fmt: skip
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(obj))
    run = tasgate("check", "-f", str(path), "-o", "patched")
    assert run.code == EXIT_BAD_INPUT, run
    assert f"{path} (document 1): nests values more than 100 levels deep" in run.out + run.err
    no_traceback(run)


def test_bad_json_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"kind": ')
    run = tasgate("check", "-f", str(path))
    assert run.code == EXIT_BAD_INPUT
    assert f"{path} (document 1): not valid JSON" in run.out
    no_traceback(run)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("- a\n- b\n", "(document 1): expected a Kubernetes object, got list"),
        ("metadata: {name: x}\n", "(document 1): not a Kubernetes object (apiVersion and kind are required)"),
        ("apiVersion: v1\nkind: List\nitems: [1]\n", "(document 1) items[0]: items[0] is not an object"),
    ],
)
def test_documents_that_are_not_objects(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "odd.yaml"
    path.write_text(text)
    run = tasgate("check", "-f", str(path))
    assert run.code == EXIT_BAD_INPUT
    assert fragment.split(": ", 1)[-1] in run.out and str(path) in run.out
    no_traceback(run)


def test_missing_file(tmp_path: Path) -> None:
    run = tasgate("check", "-f", str(tmp_path / "nope.yaml"))
    assert run.code == EXIT_BAD_INPUT
    assert f"{tmp_path / 'nope.yaml'}: no such file or directory" in run.out


def test_empty_directory(tmp_path: Path) -> None:
    run = tasgate("check", "-f", str(tmp_path))
    assert run.code == EXIT_BAD_INPUT
    assert "no .yaml, .yml or .json files in this directory" in run.out


def test_bad_policy_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(
        "apiVersion: tasgate.io/v1alpha1\nkind: AdmissionPolicy\nspec: {rules: [{gang: {backend: kai}}]}\n"
    )
    run = tasgate("check", "-f", str(MANIFESTS / "tfjob.yaml"), "--policy", str(path))
    assert run.code == EXIT_BAD_INPUT
    assert (
        "spec.rules[0].gang.backend: must be one of coscheduling, volcano, native, none, got 'kai'" in run.err
    )
    no_traceback(run)


@pytest.mark.parametrize(
    "args", [(), ("check",), ("check", "-f", "x", "-o", "xml"), ("check", "-f", "x", "--fail-on", "nope")]
)
def test_usage_errors(args: tuple[str, ...]) -> None:
    run = tasgate(*args)
    assert run.code == EXIT_BAD_INPUT
    no_traceback(run)


def test_exit_codes_mix_of_allowed_and_denied() -> None:
    allowed = tasgate(
        "check", "-f", str(MANIFESTS / "tfjob.yaml"), "-f", str(MANIFESTS / "job-required.yaml")
    )
    assert allowed.code == EXIT_OK
    mixed = tasgate(
        "check", "-f", str(MANIFESTS / "tfjob.yaml"), "-f", str(MANIFESTS / "jobset-never-fits.yaml")
    )
    assert mixed.code == EXIT_DENIED
    assert "TFJob default/tf-dist: ADMITTED (fits)" in mixed.out


@pytest.mark.parametrize(
    ("resource", "value", "fragment"),
    [
        ("cpu", "1e400", 'spec.template.spec.containers[0].resources.requests.cpu: Invalid value: "1e400"'),
        (
            GPU,
            "abc",
            'spec.template.spec.containers[0].resources.requests.nvidia.com/gpu: Invalid value: "abc"',
        ),
        ("memory", "-4Gi", "spec.template.spec.containers[0].resources.requests.memory"),
    ],
)
def test_absurd_quantities_are_denied_naming_the_field(resource: str, value: str, fragment: str) -> None:
    obj = job(2)
    obj["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"][resource] = value
    run = tasgate("check", "-f", "-", stdin=yaml.safe_dump(obj))
    assert run.code == EXIT_DENIED
    assert "Job default/train: DENIED (invalid)  [<stdin> (document 1)]" in run.out
    assert fragment in run.out
    no_traceback(run)


def test_malformed_objects_are_denied_not_crashed() -> None:
    docs = [
        {**job(2), "metadata": "oops"},
        {**job(2), "spec": [1, 2]},
        job(2, nodeSelector=["gpu"]),
    ]
    code, out = check_json("-f", "-", stdin=yaml.safe_dump_all(docs))
    assert code == EXIT_DENIED
    assert [(d["allowed"], d["reason"]) for d in out] == [(False, "invalid")] * 3
    assert [d["message"].split(":")[0] for d in out] == [
        "metadata",
        "spec",
        "spec.template.spec.nodeSelector",
    ]
