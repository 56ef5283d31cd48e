"""What a newcomer read and could not act on, each now said so it can be: a mistyped ``--fail-on``,
an input with nothing to check, a YAML slip, a half GPU, "1 pods", a note about nodes Kueue left
out for capacity, and ``-o patched`` printing what the API server would never store."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.webhook.conftest import (
    GPU,
    QUEUE_LABEL,
    RACK,
    REQUIRED,
    job,
    kueue_objects,
    node,
    running_pod,
    tasgate,
)
from webhook.cli.main import main
from webhook.decide.decision import decide
from webhook.decide.verdicts import Review
from webhook.files.policy import load_policy
from webhook.files.sample import sample_objects
from webhook.state.cluster import build_state

REPO_EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# A count of one with its noun in the plural, anywhere a person reads it.
ONE_PLURAL = re.compile(r"\b1 (pods|errors|ops|nodes|slices|suites|objects|invalid fields|such pods)\b")


def check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["check", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_an_unknown_fail_on_outcome_names_the_ones_there_are(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["check", "-f", str(REPO_EXAMPLES), "--fail-on", "wait"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "invalid parse_fail_on value" not in err
    assert "argument --fail-on: unknown outcome 'wait' (did you mean 'waits'?)" in err
    assert "the outcomes are denied, waits, unchecked (or not-checked) and admitted" in err


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("", "nothing to check: the input holds no Kubernetes object"),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
            "nothing to check: 1 object read (ConfigMap), not a workload tasgate judges",
        ),
    ],
)
def test_a_run_that_checks_nothing_says_why(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, why: str
) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(content)
    code, out, err = check(capsys, "-f", str(path))
    assert (code, out) == (2, "checked 0: 0 admitted, 0 waits, 0 denied; 0 not checked; 0 errors\n")
    assert err.startswith(f"tasgate: error: {why}"), err


def test_a_yaml_slip_names_the_file_line_and_column(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: x\nspec: {a: b: c}\n")
    code, out, _ = check(capsys, "-f", str(path))
    assert code == 2 and "<unicode string>" not in out
    assert (
        f"  {path}:5:12: not valid YAML (document 1): did not find expected ',' or '}}' "
        "(while parsing a flow mapping at line 5, column 7)"
    ) in out.splitlines()


def test_a_half_gpu_is_a_list_of_field_errors_not_a_python_list(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    obj = job(2, gpus=0, queue="user-queue")
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {GPU: "0.5"},
        "limits": {GPU: "0.5"},
    }
    path = tmp_path / "half.yaml"
    path.write_text(yaml.safe_dump(obj))
    _, out, _ = check(capsys, "-f", str(path))
    lines = out.splitlines()
    at = lines.index("  2 invalid fields:")
    assert lines[at + 1 : at + 3] == [
        f'    spec.template.spec.containers[0].resources.{where}.nvidia.com/gpu: Invalid value: "0.5": '
        "must be an integer"
        for where in ("requests", "limits")
    ]
    assert not any(line.strip().startswith("[") for line in lines)
    _, out, _ = check(capsys, "-f", str(path), "-o", "json")
    (result,) = yaml.safe_load(out)["results"]
    assert [e.split(":")[0] for e in result["fieldErrors"]] == [
        f"spec.template.spec.containers[0].resources.{where}.nvidia.com/gpu"
        for where in ("requests", "limits")
    ]


def full_rack() -> list[dict[str, Any]]:
    """One rack of one 8-GPU node, busy now: any 8-GPU pod must wait for it."""
    labels = {"block": "b", "rack": "r", "pool": "gpu"}
    return [*kueue_objects(), node("n1", labels), running_pod("busy", "n1", 8)]


def test_counts_of_one_are_singular_everywhere(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump_all(full_rack()))
    one = tmp_path / "one.yaml"
    one.write_text(yaml.safe_dump(job(1, annotations={REQUIRED: "rack"}, queue="q", namespace="team")))
    two = tmp_path / "two.yaml"  # never fits: the rack holds 1 pod even when empty
    two.write_text(
        yaml.safe_dump(job(2, annotations={REQUIRED: "rack"}, queue="q", namespace="team", name="t"))
    )
    labelled = tmp_path / "labelled.yaml"  # on the sample cluster the policy adds one label: 1 op
    labelled.write_text(yaml.safe_dump(job(4, annotations={REQUIRED: RACK}, queue="user-queue")))
    outputs = []
    for args in (
        ["-f", str(labelled)],
        ["-f", str(one), "--state", str(state)],
        ["-f", str(two), "--state", str(state)],
        ["-f", str(one), "-f", str(tmp_path / "missing.yaml"), "--state", str(state)],
    ):
        outputs.append("".join(check(capsys, *args)[1:]))
    main(["map", "-f", str(one), "--state", str(state)])
    outputs.append(capsys.readouterr().out)
    text = "\n".join(outputs)
    assert "PodSet main: 1 pod, required rack" in text
    assert "must wait: the best rack has room for 0 of 1 pod now (1 short)" in text
    assert "the largest rack holds 1 such pod even when empty" in text
    assert "The whole topology holds only 1 such pod even when empty" in text
    assert "1 op adding" in text and text.count("; 1 error\n") == 1
    assert not ONE_PLURAL.search(text), ONE_PLURAL.search(text)


def grown(state_objects: list[dict[str, Any]]) -> str:
    """An UPDATE growing a suspended Job's rack gang from 4 to 6 pods (racks hold 4): denied."""
    old = job(4, annotations={REQUIRED: RACK}, queue="user-queue")
    old["spec"]["suspend"] = True
    new = copy.deepcopy(old)
    new["spec"]["parallelism"] = new["spec"]["completions"] = 6
    review = Review(new, namespace="default", operation="UPDATE", old_obj=old)
    d = decide(review, build_state(state_objects), load_policy("default"))
    assert not d.allowed
    return d.message


def sample_plus(*extra: dict[str, Any], tainted: str = "") -> list[dict[str, Any]]:
    objects = [*sample_objects(), *extra]
    for o in objects:
        if o["kind"] == "Node" and o["metadata"]["name"] == tainted:
            o["spec"] = {"taints": [{"key": "maintenance", "value": "true", "effect": "NoSchedule"}]}
    return objects


def test_a_denial_says_no_capacity_note_nobody_can_act_on() -> None:
    labels = {
        "cloud.provider.com/topology-block": "b1",
        "cloud.provider.com/topology-rack": "b1-r1",
        "cloud.provider.com/node-group": "tas-group",
    }
    message = grown(sample_plus(node("b1-r1-h5", labels, gpus=4)))  # one node too small for a pod
    assert "the largest rack holds 4 such pods even when empty" in message
    assert "left out" not in message and 'resource "nvidia.com/gpu"' not in message, message
    assert message.endswith("or at most 4 pods."), message


def test_nodes_left_out_by_a_taint_are_named_with_the_fix() -> None:
    message = grown(sample_plus(tainted="b1-r2-h1"))
    assert message.endswith(
        'Of 32 nodes, taint "maintenance=true:NoSchedule" excludes 1 node: tolerate the taint (in the '
        "pod template, or in the ResourceFlavor's tolerations) to use it."
    ), message


def test_patched_prints_only_what_the_api_server_would_store(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = check(capsys, "-f", str(REPO_EXAMPLES), "-o", "patched")
    stored = [d for d in yaml.safe_load_all(out) if d]
    assert code == 1 and "llm-pretrain" not in out
    assert {d["metadata"]["name"] for d in stored} == {
        "resnet-rack", "vllm-serving", "allreduce-bench", "llama-finetune",
    }  # fmt: skip
    assert (
        "tasgate: left out JobSet default/llm-pretrain [examples/jobset-never-fits.yaml (document 1)]: "
        "denied (never-fits), the API server would not store it"
    ) in err.replace(str(REPO_EXAMPLES.parent) + "/", "")


def test_a_denied_rayjob_is_not_printed_either(tmp_path: Path) -> None:
    """The issue's own case, through the console script: a RayJob no block can hold."""
    worker = {
        "metadata": {"annotations": {REQUIRED: "cloud.provider.com/topology-block"}},
        "spec": {"containers": [{"name": "w", "resources": {"requests": {GPU: "8"}, "limits": {GPU: "8"}}}]},
    }
    head = {"spec": {"containers": [{"name": "h", "resources": {"requests": {"cpu": "1"}}}]}}
    rayjob = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "ray", "namespace": "default", "labels": {QUEUE_LABEL: "user-queue"}},
        "spec": {
            "suspend": True,
            "rayClusterSpec": {
                "headGroupSpec": {"template": head},
                "workerGroupSpecs": [{"groupName": "gpu", "replicas": 40, "template": worker}],
            },
        },
    }
    path = tmp_path / "ray.yaml"
    path.write_text(yaml.safe_dump(rayjob))
    run = tasgate("check", "-f", str(path), "-o", "patched")
    assert run.code == 1 and "DENIED" not in run.out
    assert [d for d in yaml.safe_load_all(run.out) if d] == []
    assert f"tasgate: left out RayJob default/ray [{path} (document 1)]: denied" in run.err
