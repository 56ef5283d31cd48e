"""The conventions a user of kubectl and kyverno brings: `tasgate version`, `status -o yaml`,
`tasgate test` results a CI system reads (JUnit XML, JSON), and ``-R`` shown as kubectl shows it."""

from __future__ import annotations

import argparse
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests.webhook.conftest import REPO, tasgate
from webhook.cli import status, version
from webhook.state.cluster import build_state

TOOLS = REPO / "e2e" / "tools"


def go_mod_pin(directory: str, module: str) -> str:
    """What the wrapper module requires, read here on its own (the line build-binaries.sh reads)."""
    text = (TOOLS / directory / "go.mod").read_text()
    found = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", text, re.M)
    assert found, f"{module} in e2e/tools/{directory}/go.mod"
    return found.group(1)


# --- version ---------------------------------------------------------------------------------------


def test_version_names_the_client_its_build_and_what_it_was_proven_against() -> None:
    kueue, kube = go_mod_pin("kueue", "sigs.k8s.io/kueue"), go_mod_pin("kube", "k8s.io/kubernetes")
    run = tasgate("version")
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert lines[0] == f"Client Version: {tasgate('--version').out.split()[1]}"
    assert re.match(r"^Build: Python 3\.\d+\.\d+ on \w+/\w+, scorer (compiled|reference)$", lines[1]), lines[
        1
    ]
    assert lines[2].startswith(f"Proven against: Kueue {kueue}, Kubernetes {kube}, scheduler-plugins")
    assert lines[2].endswith("(e2e/tools/*/go.mod)")
    doc = json.loads(tasgate("version", "-o", "json").out)
    assert doc["provenAgainst"]["kueue"] == kueue and doc["provenAgainst"]["kubernetes"] == kube
    assert yaml.safe_load(tasgate("version", "-o", "yaml").out) == doc


def test_version_reads_the_pins_never_a_copy_of_them(tmp_path: Path) -> None:
    (tmp_path / "kueue").mkdir()
    (tmp_path / "kueue" / "go.mod").write_text("module x\n\nrequire sigs.k8s.io/kueue v9.8.7\n")
    proven = version.version_info(tmp_path)["provenAgainst"]
    assert (proven["kueue"], proven["kubernetes"]) == ("v9.8.7", None)
    none = version.version_info(tmp_path / "absent")["provenAgainst"]
    assert none["kueue"] is None and none["source"].startswith("unknown: not a source checkout")
    assert "Proven against: - (unknown" in version.text(version.version_info(tmp_path / "absent"))


# --- status -o yaml --------------------------------------------------------------------------------


def test_status_gives_yaml_as_it_gives_json(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    async def no_gangs(kubeconfig: str, context: str | None) -> dict[str, list[Any]]:
        return {}

    monkeypatch.setattr(status, "state_for", lambda refs, kubeconfig, context: build_state([]))
    monkeypatch.setattr(status, "_list_tracked", no_gangs)
    base = {"kubeconfig": "k", "context": None, "namespace": None, "policy": "none"}
    documents = {}
    for fmt in ("json", "yaml"):
        assert status.run(argparse.Namespace(**base, output=fmt)) == 0
        out = capsys.readouterr().out
        documents[fmt] = orjson.loads(out) if fmt == "json" else yaml.safe_load(out)
    assert documents["yaml"] == documents["json"]
    assert (documents["yaml"]["apiVersion"], documents["yaml"]["kind"]) == ("tasgate.io/v1", "GangStatusList")
    assert "yaml" in tasgate("status", "--help").out


# --- tasgate test -o junit|json ----------------------------------------------------------------------


def suites(tmp_path: Path) -> Path:
    manifest = REPO / "examples" / "jobset-never-fits.yaml"
    (tmp_path / "a.yaml").write_text(
        "apiVersion: tasgate.io/v1alpha1\nkind: Test\nmetadata: {name: s}\ncases:\n"
        f"- name: wrong\n  manifest: {manifest}\n  expect: {{outcome: admitted}}\n"
        f"- name: right\n  manifest: {manifest}\n  expect: {{outcome: denied}}\n"
    )
    (tmp_path / "b.yaml").write_text(
        "apiVersion: tasgate.io/v1alpha1\nkind: Test\nmetadata: {name: broken}\n"
    )
    return tmp_path


def test_junit_for_a_ci_system(tmp_path: Path) -> None:
    run = tasgate("test", str(suites(tmp_path)), "-o", "junit")
    assert run.code == 2, "a suite could not run"
    assert run.err.strip() == "1 passed, 1 failed, 1 suite could not run", "the summary goes to stderr"
    root = ET.fromstring(run.out)
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "1", "1")
    by_name = {s.get("name"): s for s in root.iter("testsuite")}
    cases = {c.get("name"): c for c in by_name["s"].iter("testcase")}
    assert set(cases) == {"wrong", "right"}
    failure = cases["wrong"].find("failure")
    assert failure is not None and failure.get("message") == "outcome denied, expected admitted"
    assert cases["right"].find("failure") is None and cases["right"].get("classname") == "s"
    (broken,) = [s for name, s in by_name.items() if name != "s"]
    error = broken.find("testcase/error")
    assert error is not None and "cases: must be a non-empty list" in (error.get("message") or "")


def test_json_for_a_script(tmp_path: Path) -> None:
    run = tasgate("test", str(suites(tmp_path)), "-o", "json")
    doc = json.loads(run.out)
    assert (doc["apiVersion"], doc["kind"]) == ("tasgate.io/v1", "TestReport")
    assert doc["summary"] == {"passed": 1, "failed": 1, "errors": 1}
    (ran,) = [s for s in doc["suites"] if s["name"] == "s"]
    assert [(c["name"], c["result"], c["problems"]) for c in ran["cases"]] == [
        ("wrong", "fail", ["outcome denied, expected admitted"]),
        ("right", "pass", []),
    ]


def test_the_text_is_unchanged_by_default() -> None:
    run = tasgate("test", str(REPO / "examples" / "tests"))
    assert run.code == 0 and run.out.splitlines()[-1] == "5 passed, 0 failed" and run.err == ""


# --- -R as kubectl shows it ----------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["check", "map"])
def test_recursive_reads_as_kubectls(command: str) -> None:
    text = tasgate(command, "--help").out
    usage = " ".join(text.split("\n\n")[0].split())
    assert "[-R] [--no-recursive]" in usage
    flat = " ".join(text.split())  # argparse wraps to the terminal's width
    assert "-R, --recursive process the directory used in -f, --filename recursively, as kubectl -R" in flat
    assert "--no-recursive read only the files directly in a -f directory" in flat
    assert "(default: True)" not in text and "(default: False)" not in text
