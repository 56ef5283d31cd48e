"""`tasgate test`: the shipped example suite passes, and a wrong expectation fails loudly."""

from __future__ import annotations

from pathlib import Path

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
