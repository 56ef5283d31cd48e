"""One truth in every output: `check`'s text and its JSON/YAML report say the same facts.

Every outcome — admitted, waits by topology, waits by quota, denied (never fits, and an invalid
object), not-checked, error (a missing file, a YAML slip), and a podset group with its leader —
is rendered both ways through the real ``main()``; the facts are read back from each output as a
person or a script reads them (the text parsed line by line, never from shared code) and compared.
The quota case is the one the issue found disagreeing: the text said ``fits now: yes`` where the
report said ``fitsNow: false``. The PodSet's topology has room now, the workload is held by quota:
both facts, in every format.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.webhook.conftest import GPU, MANIFESTS, RACK, REPO, REQUIRED, job
from webhook.cli.main import main
from webhook.decide.messages import short_level
from webhook.files.sample import sample_objects

EXAMPLES = REPO / "examples"
HEAD = re.compile(r"^(\S+) (\S*)/(\S+): (ADMITTED|WAITS|DENIED|NOT CHECKED) \((\S+)\)  \[(.+)\]$")
POD_SET = re.compile(r"^  PodSet (\S+): (\d+) pods?, ")
FITS = re.compile(
    r"^    fits now: (yes|no)(?: \(the topology (has|has no) room; quota in use holds it back\))?"
    r" · fits when empty: (yes|no)"
)
ROW = re.compile(r"^    (\S+)\s+(\d+)\s+(\d+)\s+(\d+) of (\d+)$")
OUTCOMES = {"ADMITTED": "admitted", "WAITS": "waits", "DENIED": "denied", "NOT CHECKED": "not-checked"}


@dataclass(frozen=True)
class PodSetFacts:
    name: str
    count: int
    judged: bool
    fits_now: bool | None = None
    topology_fits_now: bool | None = None
    quota_held: bool | None = None
    fits_when_empty: bool | None = None
    placed_with: str | None = None
    levels: tuple[tuple[str, int, int, int, int], ...] = ()


@dataclass(frozen=True)
class Facts:
    source: str
    outcome: str
    workload: tuple[str, str, str] = ("", "", "")
    reason: str = ""
    message: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    pod_sets: tuple[PodSetFacts, ...] = ()
    patch_ops: int = 0
    error: str = ""


# --- the text, as a person reads it ----------------------------------------------------------------


def text_facts(out: str) -> list[Facts]:
    blocks: list[list[str]] = []
    for line in out.splitlines()[:-1]:  # the last line is the summary
        if not line.startswith(" "):
            blocks.append([])
        blocks[-1].append(line)
    return [_text_block(b) for b in blocks]


def _text_block(lines: list[str]) -> Facts:
    if lines[0].startswith("ERROR "):
        return Facts(lines[0][len("ERROR ") :], "error", error=lines[1].strip())
    head = HEAD.match(lines[0])
    assert head, lines[0]
    kind, namespace, name, verdict, reason, source = head.groups()
    message, warnings, pod_sets, ops = [], [], [], 0
    for line in lines[1:]:
        if line.startswith("  warning: "):
            warnings.append(line[len("  warning: ") :])
        elif POD_SET.match(line):
            found = POD_SET.match(line)
            assert found
            pod_sets.append({"name": found.group(1), "count": int(found.group(2)), "lines": []})
        elif line.startswith("    ") and pod_sets:
            pod_sets[-1]["lines"].append(line)
        elif line.startswith("    "):  # an invalid object's field errors, one a line
            message.append(line.strip())
        elif line.startswith("  patch: "):
            ops = int(line.split()[1])
        elif not line.startswith(("  queue ", "  podgroup: ", "  workload: ")) and not re.match(
            r"^  \d+ invalid fields?:$", line
        ):
            message.append(line.strip())
    return Facts(
        source, OUTCOMES[verdict], (kind, namespace, name), reason, tuple(message), tuple(warnings),
        tuple(_text_pod_set(p) for p in pod_sets), ops,
    )  # fmt: skip


def _text_pod_set(p: dict[str, Any]) -> PodSetFacts:
    fits = next((FITS.match(line) for line in p["lines"] if FITS.match(line)), None)
    if fits is None:
        return PodSetFacts(p["name"], p["count"], judged=False)
    now, room, empty = fits.groups()
    leader = next((line for line in p["lines"] if line.startswith("    placed with PodSet ")), None)
    rows = [ROW.match(line) for line in p["lines"]]
    return PodSetFacts(
        p["name"],
        p["count"],
        judged=True,
        fits_now=now == "yes",
        topology_fits_now=(room == "has") if room else now == "yes",
        quota_held=room is not None,
        fits_when_empty=empty == "yes",
        placed_with=leader.split()[3] if leader else None,
        levels=tuple((r[1], int(r[2]), int(r[3]), int(r[4]), int(r[5])) for r in rows if r),
    )


# --- the report, as a script reads it ---------------------------------------------------------------


def report_facts(document: dict[str, Any]) -> list[Facts]:
    return [_report_result(r) for r in document["results"]]


def _report_result(r: dict[str, Any]) -> Facts:
    if r["outcome"] == "error":
        return Facts(r["source"], "error", error=r["error"])
    message = (
        tuple(r["fieldErrors"]) if len(r.get("fieldErrors", ())) > 1 else (r["message"],) * bool(r["message"])
    )
    return Facts(
        r["source"], r["outcome"], (r["kind"], r["namespace"], r["name"]), r["reason"], message,
        tuple(r["warnings"]), tuple(_report_pod_set(p) for p in r["podSets"]), len(r["patch"]),
    )  # fmt: skip


def _report_pod_set(p: dict[str, Any]) -> PodSetFacts:
    if not p["judged"]:
        return PodSetFacts(p["name"], p["count"], judged=False)
    levels = tuple(
        (
            short_level(r["level"]),
            r["nowMaxPods"],
            r["whenEmptyMaxPods"],
            r["whenEmptyFittingDomains"],
            r["domains"],
        )
        for r in p["levels"]
    )
    return PodSetFacts(
        p["name"],
        p["count"],
        judged=True,
        fits_now=p["fitsNow"],
        topology_fits_now=p["topologyFitsNow"],
        quota_held=p["quotaNow"] is not None,
        fits_when_empty=bool(p["whenEmpty"] and p["whenEmpty"]["fits"]),
        placed_with=p["placedWith"],
        levels=levels,
    )


# --- the outcomes -------------------------------------------------------------------------------------


def quota_dump(directory: Path) -> Path:
    """The sample cluster whose ClusterQueue has 64 GPUs of quota, 48 of them held by an admitted
    Workload: a 4 x 8-GPU gang fits a rack now, but not the 16 GPUs of quota left."""
    objects = sample_objects()
    for o in objects:
        if o["kind"] == "ClusterQueue":
            for r in o["spec"]["resourceGroups"][0]["flavors"][0]["resources"]:
                if r["name"] == GPU:
                    r["nominalQuota"] = 64
    held = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "big", "namespace": "default"},
        "spec": {"podSets": [{"name": "main", "count": 6, "template": {"spec": {"containers": []}}}]},
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True"}],
            "admission": {
                "clusterQueue": "tas-cluster-queue",
                "podSetAssignments": [
                    {"name": "main", "count": 6, "flavors": {GPU: "tas-flavor"}, "resourceUsage": {GPU: "48"}}
                ],
            },
        },
    }
    (directory / "core.yaml").write_text(yaml.safe_dump_all(objects, sort_keys=False))
    (directory / "kueue.yaml").write_text(yaml.safe_dump(held, sort_keys=False))
    return directory


def rack_job(directory: Path, gpus: str = "8") -> Path:
    obj = job(4, annotations={REQUIRED: RACK}, queue="user-queue", name="rack4")
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "16", GPU: gpus},
        "limits": {GPU: gpus},
    }
    path = directory / f"rack4-{gpus}.yaml"
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    return path


CASES = {  # name -> (outcome, how to make the -f and --state arguments)
    "admitted": ("admitted", lambda d: [str(EXAMPLES / "job-rack.yaml")]),
    "waits by topology": ("waits", lambda d: [str(EXAMPLES / "pytorchjob-waits.yaml")]),
    "waits by quota": ("waits", lambda d: [str(rack_job(d)), "--state", str(quota_dump(d))]),
    "denied": ("denied", lambda d: [str(EXAMPLES / "jobset-never-fits.yaml")]),
    "denied: invalid": ("denied", lambda d: [str(rack_job(d, "0.5"))]),
    "group leader": ("admitted", lambda d: [str(EXAMPLES / "mpijob-unannotated.yaml")]),
    "not-checked": ("not-checked", lambda d: [str(MANIFESTS / "unknown-kind.yaml")]),
    "error: no file": ("error", lambda d: [str(d / "no-such.yaml")]),
    "error: bad YAML": ("error", lambda d: [str(_broken(d))]),
}


def _broken(directory: Path) -> Path:
    path = directory / "broken.yaml"
    path.write_text("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: x\nspec: {a: b: c}\n")
    return path


def run(capsys: pytest.CaptureFixture[str], args: list[str], fmt: str) -> str:
    main(["check", "-f", *args, "-o", fmt])
    return capsys.readouterr().out


@pytest.mark.parametrize("case", list(CASES))
def test_text_and_report_say_the_same_facts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, case: str
) -> None:
    outcome, make = CASES[case]
    args = make(tmp_path)
    text = text_facts(run(capsys, args, "text"))
    report = json.loads(run(capsys, args, "json"))
    assert yaml.safe_load(run(capsys, args, "yaml")) == report, "-o yaml is the -o json document"
    assert [f.outcome for f in text] == [outcome]
    assert text == report_facts(report)


def test_a_workload_held_by_quota_fits_the_topology_and_says_so_everywhere(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = CASES["waits by quota"][1](tmp_path)
    (facts,) = text_facts(run(capsys, args, "text"))
    (ps,) = facts.pod_sets
    assert (ps.fits_now, ps.topology_fits_now, ps.quota_held) == (False, True, True)
    (result,) = json.loads(run(capsys, args, "json"))["results"]
    assert "insufficient unused quota for nvidia.com/gpu" in result["quotaNow"]
    assert [(f["fitsNow"], f["topologyFitsNow"]) for f in result["flavors"]] == [(False, True)]
    assert "fits now: no (the topology has room; quota in use holds it back)" in run(capsys, args, "text")


def test_a_group_leader_names_its_workers_instead_of_their_figures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = [str(EXAMPLES / "mpijob-unannotated.yaml")]
    (facts,) = text_facts(run(capsys, args, "text"))
    launcher, worker = facts.pod_sets
    assert (launcher.count, launcher.placed_with, launcher.levels) == (1, "worker", ())
    assert worker.placed_with is None and worker.levels[0][:3] == ("block", 10, 16)
    text = run(capsys, args, "text")
    assert re.search(r"placed with PodSet worker .*: now on b\d-r\d-h\d", text), text
