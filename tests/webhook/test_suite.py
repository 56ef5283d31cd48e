"""`tasgate test`: the shipped example suite passes, and a wrong expectation fails loudly."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.webhook.conftest import REPO, tasgate


def test_the_shipped_example_suite_passes() -> None:
    run = tasgate("test", str(REPO / "examples" / "tests"))
    assert run.code == 0, run.out + run.err
    assert run.out.splitlines()[-1] == "5 passed, 0 failed"


def test_a_wrong_expectation_fails_and_says_why(tmp_path: Path) -> None:
    suite = tmp_path / "suite.yaml"
    manifest = REPO / "examples" / "jobset-never-fits.yaml"
    suite.write_text(
        "apiVersion: tasgate.io/v1alpha1\nkind: Test\nmetadata: {name: s}\ncases:\n"
        f"- name: wrong\n  manifest: {manifest}\n  expect: {{outcome: admitted, reason: fits}}\n"
        f"- name: right\n  manifest: {manifest}\n  expect: {{outcome: denied}}\n"
    )
    run = tasgate("test", str(suite))
    assert run.code == 1
    assert "FAIL s / wrong: outcome denied, expected admitted; reason never-fits, expected fits" in run.out
    assert "PASS s / right" in run.out and run.out.splitlines()[-1] == "1 passed, 1 failed"


def test_no_suite_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    run = tasgate("test", str(tmp_path))
    assert run.code == 2 and "no test cases found" in run.err


# --- shapes: a string or a list, relative to the suite; a bad one stops that suite only -----------

GOOD = (
    "apiVersion: tasgate.io/v1alpha1\nkind: Test\nmetadata: {name: good}\n"
    "cases: [{name: rack, manifest: job.yaml, expect: {outcome: admitted}}]\n"
)


def layout(tmp_path: Path) -> Path:
    """tmp/{job.yaml, cluster.yaml (the sample without its LocalQueues), nodes.yaml, kueue.yaml,
    volcano.yaml (a policy)} and tmp/suites/ for the suites."""
    (tmp_path / "job.yaml").write_text((REPO / "examples" / "job-rack.yaml").read_text())
    objects = list(yaml.safe_load_all(tasgate("sample-cluster").out))
    plain = [o for o in objects if o["kind"] != "LocalQueue"]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(plain))
    kueue = [o for o in objects if o["apiVersion"].startswith("kueue")]
    (tmp_path / "kueue.yaml").write_text(yaml.safe_dump_all(kueue))
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump_all([o for o in objects if o not in kueue]))
    (tmp_path / "volcano.yaml").write_text(
        "apiVersion: tasgate.io/v1alpha1\nkind: AdmissionPolicy\nspec:\n  rules:\n"
        "  - inject: {mode: none}\n    gang: {backend: volcano}\n"
    )
    (tmp_path / "suites").mkdir()
    return tmp_path / "suites"


def test_state_and_policy_are_a_string_or_a_list_relative_to_the_suite(tmp_path: Path) -> None:
    suites = layout(tmp_path)
    (suites / "s.yaml").write_text(
        "apiVersion: tasgate.io/v1alpha1\nkind: Test\nmetadata: {name: one-file}\n"
        "state: ../cluster.yaml\npolicy: ../volcano.yaml\ncases:\n- name: no queue\n"
        "  manifest: ../job.yaml\n  expect: {outcome: not-checked, reason: kueue-config}\n"
        "---\napiVersion: tasgate.io/v1alpha1\nkind: Test\nmetadata: {name: two-files}\n"
        "state: [../nodes.yaml, ../kueue.yaml]\npolicy: [../volcano.yaml]\ncases:\n- name: volcano\n"
        "  manifest: ../job.yaml\n  expect: {outcome: admitted, injects: scheduling.k8s.io/group-name}\n"
    )
    run = tasgate("test", str(suites))
    assert (run.code, run.out.splitlines()) == (
        0,
        ["PASS one-file / no queue", "PASS two-files / volcano", "2 passed, 0 failed"],
    ), run.err


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("state: 42\ncases: []\n", "state: must be a file name or a list of them, got int 42"),
        ("state: {a: b}\n", "state: must be a file name or a list of them, got a dict of 1"),
        ("state: [../job.yaml, 3]\n", "state: must be a file name or a list of them"),
        ("state: ../missing.yaml\n", "/suites/../missing.yaml: no such file or directory"),
        ("state: ../job.yaml\n", "the cluster state has no nodes, so nothing can be placed"),
        ("policy: [default, none]\n", "policy: one policy per suite (default, none or a file), got 2"),
        ("policy: 7\n", "policy: must be a file name or a list of them, got int 7"),
        ("policy: ../missing.yaml\n", "cannot read policy file"),
        ("metadata: [x]\n", "metadata: must be a mapping, got a list of 1"),
        ("case: []\n", "unknown field(s) case; the fields are apiVersion, kind, metadata, state"),
        ("cases: {}\n", "cases: must be a non-empty list of cases, got a dict of 0"),
        ("cases: []\n", "cases: must be a non-empty list of cases, got a list of 0"),
        ("cases: [3]\n", "cases[0]: must be a mapping with manifest and expect, got int 3"),
        ("cases: [{expect: {}}]\n", "cases[0].manifest: must be a file name, got nothing"),
        ("cases: [{manifest: a, expected: {}}]\n", "unknown field(s) cases[0].expected"),
        ("cases: [{manifest: a, expect: [1]}]\n", "cases[0].expect: must be a mapping, got a list of 1"),
        ("cases: [{manifest: a, expect: {injects: 5}}]\n", "cases[0].expect.injects: must be a key"),
        ("cases: [{manifest: a}]\n", "cases[0].expect: must be a mapping, got nothing"),
        ("cases: [{manifest: a, expect: {reason: fits}}]\n", "cases[0].expect.outcome: required"),
    ],
)
def test_a_bad_shape_is_an_error_for_that_suite_and_the_others_still_run(
    tmp_path: Path, body: str, says: str
) -> None:
    suites = layout(tmp_path)
    bad = "apiVersion: tasgate.io/v1alpha1\nkind: Test\n" + body
    if "cases" not in body and "case:" not in body:
        bad += "cases: [{manifest: ../job.yaml, expect: {outcome: admitted}}]\n"
    (suites / "a-bad.yaml").write_text(bad)
    (suites / "b-good.yaml").write_text(GOOD.replace("job.yaml", "../job.yaml"))
    run = tasgate("test", str(suites))
    lines = run.out.splitlines()
    assert run.code == 2, run.out + run.err
    assert lines[0].startswith(f"ERROR {suites / 'a-bad.yaml'} (document 1): ") and says in lines[0], lines
    assert lines[1:] == ["PASS good / rack", "1 passed, 0 failed, 1 suite could not run"]
    assert "Traceback" not in run.err


def test_an_unreadable_suite_file_does_not_stop_the_others(tmp_path: Path) -> None:
    suites = layout(tmp_path)
    (suites / "a.yaml").write_text("apiVersion: tasgate.io/v1alpha1\nkind: Test\ncases: [unclosed\n")
    (suites / "b.yaml").write_text(GOOD.replace("job.yaml", "../job.yaml"))
    run = tasgate("test", str(suites))
    assert run.code == 2
    assert run.out.splitlines()[0].startswith(f"ERROR {suites / 'a.yaml'}:4:1: not valid YAML (document 1)")
    assert run.out.splitlines()[-2:] == ["PASS good / rack", "1 passed, 0 failed, 1 suite could not run"]
