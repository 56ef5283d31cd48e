"""`tasgate map`: docs/topology-map.md's sample is what it prints, and its sources and exit codes."""

from __future__ import annotations

import re
from pathlib import Path

from tests.webhook.conftest import MANIFESTS, REPO, tasgate

START, END = "<!-- sample:map -->\n", "<!-- sample:map-end -->"


DOC = REPO / "docs" / "topology-map.md"


def test_documented_map_sample_is_what_tasgate_prints() -> None:
    text = DOC.read_text()
    block = text[text.index(START) + len(START) : text.index(END)]
    command = re.search(r"^\$ tasgate (.+)$", block, re.M)
    assert command is not None
    run = tasgate(*command.group(1).split())
    assert run.code == 0, run.err
    assert block == f"```\n$ tasgate {command.group(1)}\n{run.out}```\n", "paste what the command prints now"


def test_text_without_workloads_has_no_waiting_gangs() -> None:
    run = tasgate("map")
    assert run.code == 0, run.err
    assert "b2 104/128 (16 unavailable) · 8-GPU pods 10 · 8x8 1 · 32x8 0" in run.out
    assert "waiting" not in run.out


def test_html_is_one_self_contained_page() -> None:
    run = tasgate("map", "-o", "html", "-f", str(MANIFESTS / "pytorchjob-waits.yaml"))
    assert run.code == 0, run.err
    page = run.out
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert page.count("<svg ") == 1 and page.count('class="domain"') == 42
    assert "<script" not in page and "<link" not in page and "src=" not in page
    assert "W1" in page and "llama-finetune" in page


def test_state_files_and_a_policy_with_its_own_shapes(tmp_path: Path) -> None:
    dump = tmp_path / "state.yaml"
    dump.write_text(tasgate("sample-cluster").out)
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "apiVersion: tasgate.io/v1alpha1\nkind: AdmissionPolicy\nmetadata: {name: p}\n"
        "spec: {gangShapes: [{pods: 2, gpusPerPod: 4}]}\n"
    )
    run = tasgate("map", "--state", str(dump), "--policy", str(policy))
    assert run.code == 0, run.err
    assert "b1-r2 16/32 · 4-GPU pods 4 · 2x4 2" in run.out and "8x8" not in run.out


def test_unreadable_input_and_bad_policy_exit_2(tmp_path: Path) -> None:
    run = tasgate("map", "-f", str(tmp_path / "missing.yaml"))
    assert run.code == 2 and "missing.yaml" in run.err
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: tasgate.io/v1alpha1\nkind: AdmissionPolicy\nspec: {gangShapes: [{pods: 0}]}\n"
    )
    run = tasgate("map", "--policy", str(bad))
    assert run.code == 2 and "spec.gangShapes[0]" in run.err and "Traceback" not in run.err


def test_waiting_gangs_are_numbered_once_and_one_judged_without_a_flavor_is_listed(tmp_path: Path) -> None:
    """A queue-less Job is judged on the policy's default topology (every node, no flavor): listed,
    with its figures, but not drawn into a flavor's boxes."""
    queued = (MANIFESTS / "pytorchjob-waits.yaml").read_text()
    no_queue = (
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: no-queue, namespace: default}\n"
        "spec:\n  parallelism: 15\n  completions: 15\n  suspend: true\n  template:\n"
        "    metadata:\n      annotations:\n"
        "        kueue.x-k8s.io/podset-required-topology: cloud.provider.com/topology-block\n"
        "    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: x, resources: "
        '{requests: {nvidia.com/gpu: "8"}, limits: {nvidia.com/gpu: "8"}}}]\n'
    )
    (tmp_path / "both.yaml").write_text(queued + "\n---\n" + no_queue + "---\n" + queued)
    run = tasgate("map", "-f", str(tmp_path / "both.yaml"))
    assert run.code == 0, run.err
    waiting = [line for line in run.out.splitlines() if line.startswith("waiting ")]
    assert [w.split()[1:4] for w in waiting] == [
        ["W1", "Job", "default/no-queue"],
        ["W2", "PyTorchJob", "default/llama-finetune"],
    ], "a workload given twice is one gang, the last given"
    assert "in a domain not drawn (judged without a TAS flavor)" in run.out
    assert "tie: on an empty cluster Kueue's order picks b1" in run.out, "the tie-break said as one"
    html = tasgate("map", "-o", "html", "-f", str(tmp_path / "both.yaml")).out
    tags = re.findall(r'<text class="tag"[^>]*>([^<]*)</text>', html)
    assert tags == ["W2"], "only the flavor's gang is drawn, once"
    assert re.search(r'data-domain="b2"[^>]*>\s*<title>[^<]*</title>\s*<rect[^>]*stroke="#7b2cbf"', html), (
        "outlined where it comes closest now, not at the empty-cluster tie-break"
    )
    assert 'http-equiv="refresh"' not in html, "a file does not reload"
    assert re.search(r"state generation \d+ · rendered \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC<", html)
    assert "<td>W1</td>" in html and "<td>W2</td>" in html
