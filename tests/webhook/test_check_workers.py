"""``tasgate check --worker NAME=DIR``: a MultiKueue gang judged on its worker clusters' dumps
(issue 37.2), offline, as `decide.kueue.multikueue` joins them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.webhook.conftest import tasgate
from tests.webhook.quota_world import cluster_queue, flavors_and_topology, gang, local_queue, rack, resources
from tests.webhook.test_admission_checks import MULTIKUEUE_CONTROLLER, TWO, check, queue_with


def dump(path: Path, *objects: dict[str, Any] | list[dict[str, Any]]) -> str:
    flat: list[dict[str, Any]] = []
    for o in objects:
        flat.extend(o if isinstance(o, list) else [o])
    path.mkdir()
    (path / "state.yaml").write_text(yaml.safe_dump_all(flat))
    return str(path)


def worlds(tmp_path: Path, worker_hosts: dict[str, int]) -> list[str]:
    """The manager's dump (a MultiKueue queue, no GPU node in the pool) and one per worker."""
    manager = dump(
        tmp_path / "manager", TWO, rack("b", prefix="m"), queue_with([{"name": "mk"}]),
        local_queue("q", "cq"), check("mk", MULTIKUEUE_CONTROLLER),
    )  # fmt: skip
    args = ["--state", manager]
    for name, hosts in worker_hosts.items():
        queue = cluster_queue("cq", [("first", resources(512))])
        where = dump(tmp_path / name, flavors_and_topology({"first": "a"}), rack("a", hosts, name), queue,
                     local_queue("q", "cq"))  # fmt: skip
        args += ["--worker", f"{name}={where}"]
    return args


def run_check(tmp_path: Path, args: list[str]) -> tuple[int, dict[str, Any]]:
    manifest = tmp_path / "gang.yaml"
    manifest.write_text(yaml.safe_dump(gang(10)))
    run = tasgate("check", "-o", "json", "-f", str(manifest), *args)
    assert "Traceback" not in run.err, run.err
    (result,) = json.loads(run.out)["results"]
    return run.code, result


def test_a_worker_that_holds_the_gang_admits_it(tmp_path: Path) -> None:
    code, result = run_check(tmp_path, worlds(tmp_path, {"small": 4, "big": 16}))
    assert (code, result["allowed"], result["reason"]) == (0, True, "multikueue")
    assert any("worker clusters that hold it now: big" in w for w in result["warnings"])


def test_no_worker_that_holds_it_is_a_denial_naming_each(tmp_path: Path) -> None:
    code, result = run_check(tmp_path, worlds(tmp_path, {"small": 4, "medium": 6}))
    assert (code, result["allowed"], result["reason"]) == (1, False, "never-fits")
    assert "medium: PodSet" in result["message"] and "small: PodSet" in result["message"]


def test_a_malformed_worker_flag_is_a_clear_error(tmp_path: Path) -> None:
    manifest = tmp_path / "gang.yaml"
    manifest.write_text(yaml.safe_dump(gang(10)))
    run = tasgate("check", "-f", str(manifest), "--worker", "nameonly")
    assert run.code == 2 and "give NAME=FILE|DIR" in run.err and "Traceback" not in run.err
