"""`tasgate map` counts as `check` counts: a NoSchedule-tainted node is not free room for a shape.

The issue's cluster: one host of each free rack tainted ``maintenance=true:NoSchedule``. `check`
said the best rack has room for 3 of 4 pods; the map drew the same racks ``32/32 · 8-GPU pods 4``
(its shapes tolerated every taint of every node). Now the map's rack figure is 3, the tainted
hosts and racks are marked, and cordoned and NotReady hosts say which they are. Taints every node
of the flavor carries (a GPU pool's own), and the accelerator's taint, are still tolerated: the
workloads of that flavor carry them to run there at all.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.webhook.conftest import GPU, RACK, REQUIRED, job, tasgate
from webhook.decide.policy import GangShape, Policy
from webhook.figures.fragmentation import cluster_figures
from webhook.files.sample import sample_objects
from webhook.state.cluster import build_state

TAINTED = ("b1-r3-h4", "b1-r4-h4", "b2-r2-h4", "b2-r3-h4")
MAINTENANCE = {"key": "maintenance", "value": "true", "effect": "NoSchedule"}
FIGURE = re.compile(r"must wait: the best rack has room for (\d+) of 4 pods now")


def tainted_sample(taint: dict[str, str], hosts: tuple[str, ...] = TAINTED) -> list[dict[str, Any]]:
    objects = sample_objects()
    for o in objects:
        if o["kind"] == "Node" and (o["metadata"]["name"] in hosts or not hosts):
            o["spec"] = {**o["spec"], "taints": [dict(taint)]}
    return objects


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump_all(tainted_sample(MAINTENANCE), sort_keys=False))
    manifest = tmp_path / "rack4.yaml"
    manifest.write_text(
        yaml.safe_dump(job(4, annotations={REQUIRED: RACK}, queue="user-queue", name="rack4"))
    )
    return state, manifest


def test_the_map_counts_a_tainted_rack_as_check_does(files: tuple[Path, Path]) -> None:
    state, manifest = files
    checked = tasgate("check", "-f", str(manifest), "--state", str(state))
    found = FIGURE.search(checked.out)
    assert found and found.group(1) == "3", checked.out
    drawn = tasgate("map", "-f", str(manifest), "--state", str(state))
    assert drawn.code == 0, drawn.err
    lines = drawn.out.splitlines()
    (rack_row,) = [line for line in lines if line.startswith("  8x8    cloud.provider.com/topology-rack")]
    assert rack_row.split()[-3] == "3", "the shapes' best rack holds 3 such pods, as check says"
    for rack in ("b1-r3", "b1-r4", "b2-r2", "b2-r3"):
        (row,) = [line for line in lines if line.strip().startswith(f"{rack} ")]
        assert row.strip().startswith(f"{rack} 32/32 (8 tainted) · 8-GPU pods 3 "), row
    hosts = " ".join(line for line in lines if "hosts:" in line)
    for host in TAINTED:
        assert f"{host} 8/8 (tainted maintenance=true:NoSchedule)" in hosts
    assert "b2-r4-h3 0/8 (not ready)" in hosts and "b2-r4-h4 0/8 (cordoned)" in hosts
    assert "must wait: the best rack has room for 3 of 4 pods now (1 short)" in drawn.out


def test_the_picture_marks_them_too(files: tuple[Path, Path]) -> None:
    state, manifest = files
    page = tasgate("map", "-o", "html", "-f", str(manifest), "--state", str(state)).out
    assert "(tainted maintenance=true:NoSchedule)</title>" in page, "the host's tooltip says it whole"
    assert ">tainted maintenance=true:No…<" in page and ">cordoned<" in page and ">not ready<" in page
    assert ">8 tainted<" in page and 'data-tainted="8"' in page


def test_a_taint_every_node_carries_is_the_pools_own_and_tolerated() -> None:
    """A dedicated GPU pool: every node tainted alike; a workload of the flavor tolerates it."""
    state = build_state(tainted_sample({"key": "dedicated", "value": "ml", "effect": "NoSchedule"}, ()))
    (f,) = cluster_figures(state, Policy(name="t", gang_shapes=(GangShape(8, 8),)), per_domain=True)
    rack = next(s for s in f.shapes if s.level.endswith("rack"))
    assert rack.best_pods == 4 and all(d.tainted == 0 for d in f.domains)


def test_the_accelerators_own_taint_is_tolerated_on_some_nodes_only() -> None:
    gpu_taint = {"key": GPU, "value": "present", "effect": "NoSchedule"}
    state = build_state(tainted_sample(gpu_taint))
    (f,) = cluster_figures(state, Policy(name="t", gang_shapes=(GangShape(8, 8),)), per_domain=True)
    rack = next(s for s in f.shapes if s.level.endswith("rack"))
    assert rack.best_pods == 4 and all(d.tainted == 0 for d in f.domains)
