"""`tasgate check -o json --state DIR -f manifest.yaml` on native objects: the contract the
e2e table against the real kube-scheduler reads (outcome, podSets[].now.assignment)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.webhook.conftest import tasgate
from tests.webhook.test_native import BASE, _submitted


def _check(tmp_path: Path, state: list[dict[str, object]], manifest: list[dict[str, object]]) -> list[dict]:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "dump.yaml").write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": state})
    )
    (tmp_path / "m.yaml").write_text(yaml.safe_dump_all(manifest))
    run = tasgate("check", "-o", "json", "--state", str(tmp_path / "state"), "-f", str(tmp_path / "m.yaml"))
    assert run.code in (0, 1), run.err
    return list(json.loads(run.out)["results"])


def test_pods_and_pod_group_get_the_schedulers_domain(tmp_path: Path) -> None:
    gang, unbound, _ = _submitted("rack-gang.yaml")
    (pg,) = [d for d in gang if d["kind"] == "PodGroup"]
    results = _check(tmp_path, [*BASE, pg], [pg, unbound[0]])
    assert [r["outcome"] for r in results] == ["admitted", "admitted"]
    for r in results:
        (ps,) = r["podSets"]
        assert ps["now"]["fits"] is True
        assert ps["now"]["assignmentLevels"] == ["topology.example.com/rack"]
        assert ps["now"]["assignment"] == [{"values": ["r0"], "count": 4}]


def test_never_fits_is_denied_and_must_wait_waits(tmp_path: Path) -> None:
    never, never_pods, _ = _submitted("rack-never-fits.yaml")
    wait, wait_pods, _ = _submitted("rack-must-wait.yaml")
    groups = [d for d in never + wait if d["kind"] == "PodGroup"]
    results = _check(tmp_path, [*BASE, *groups], [never_pods[0], wait_pods[0]])
    assert [r["outcome"] for r in results] == ["denied", "waits"]
    assert results[1]["podSets"][0]["whenEmpty"]["fits"] is True


def test_indexed_job_without_a_queue_is_a_native_gang(tmp_path: Path) -> None:
    gang, _, _ = _submitted("job-never-fits.yaml")
    (job,) = [d for d in gang if d["kind"] == "Job"]
    (r,) = _check(tmp_path, list(BASE), [job])
    assert r["outcome"] == "denied" and r["podSets"][0]["native"]["backend"] == "kube-scheduler"
    assert r["podSets"][0]["minCount"] == 2
