"""One number, everywhere: `check`, `map`, `/topology` and the lifecycle tracker say the same
must-wait figure and closest domain, for each case issue 19 found them disagreeing on.

- the README's PyTorchJob: 15 x 8 GPUs required in one block (check: 10 of 15 pods in b2);
- many 1-GPU pods without a level (implied, may spread: the whole topology counts, 184 of 200 —
  on the sample cluster it takes 200 to wait where the issue's 16-node cluster took 100; map
  used to say "8 of 200", one host);
- a sliced JobSet: 3 slices of 4 pods per rack in one block (check: 2 of 3 slices; map used to
  say "10 of 12 pods").

Each figure is read from the output each command prints, never from the shared code.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestClient

from tests.webhook.conftest import BLOCK, GPU, MANIFESTS, RACK, REQUIRED, SLICE, SLICE_SIZE, tasgate
from tests.webhook.test_server import ClientFactory, Harness, post, review
from webhook.files.policy import load_policy
from webhook.serve.app import create_metrics_app
from webhook.serve.keys import STATE
from webhook.track.predict import assess, workload_view

Client = TestClient[web.Request, web.Application]
FIGURE = re.compile(
    r"must wait: ((?:the best \w+|the topology) has room for (\d+) of (\d+) (pods|slices) now)"
)


def job(count: int, gpus: int, annotations: dict[str, str]) -> dict[str, Any]:
    template = {
        "metadata": {"annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}},
                }
            ],
        },
    }
    return {"count": count, "template": template}


def jobset(name: str, pods: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
        },
        "spec": {
            "suspend": True,
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": pods["count"],
                            "completions": pods["count"],
                            "template": pods["template"],
                        }
                    },
                }
            ],
        },
    }


def batch_job(name: str, pods: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
        },
        "spec": {"parallelism": pods["count"], "completions": pods["count"], "suspend": True, **pods},
    }


def pytorchjob() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    obj: dict[str, Any] = yaml.safe_load((MANIFESTS / "pytorchjob-waits.yaml").read_text())
    specs = obj["spec"]["pytorchReplicaSpecs"]
    podsets = [
        {"name": n.lower(), "count": s["replicas"], "template": s["template"]} for n, s in specs.items()
    ]
    return obj, podsets


def many_small() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    pods = job(200, 1, {})
    obj = batch_job("many-small", {"count": 200, "template": pods["template"]})
    del obj["spec"]["count"]
    return obj, [{"name": "main", **pods}]


def sliced() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    pods = job(12, 8, {REQUIRED: BLOCK, SLICE: RACK, SLICE_SIZE: "4"})
    return jobset("sliced", pods), [{"name": "workers", **pods}]


CASES = {"pytorchjob": pytorchjob, "many-1-gpu-pods": many_small, "sliced-jobset": sliced}
EXPECTED = {
    "pytorchjob": ("the best block has room for 10 of 15 pods now", "b2"),
    "many-1-gpu-pods": ("the topology has room for 184 of 200 pods now", None),
    "sliced-jobset": ("the best block has room for 2 of 3 slices now", "b2"),
}


def from_check(path: Path) -> tuple[str, str | None]:
    """check's warning figure, and the best domain its JSON names at the level (required only)."""
    text = tasgate("check", "-f", str(path))
    found = FIGURE.search(text.out)
    assert found, text.out
    report = orjson.loads(tasgate("check", "-f", str(path), "-o", "json").out)
    (pod_set,) = [p for p in report["results"][0]["podSets"] if not p["now"]["fits"]]
    mode, level = pod_set["topologyRequest"]["mode"], pod_set["topologyRequest"]["level"]
    rows = {row["level"]: row for row in pod_set["levels"]}
    best = ",".join(rows[level]["nowBestDomain"]) if mode.lower() == "required" else None
    return found.group(1), best


@pytest.mark.parametrize("case", sorted(CASES))
async def test_check_map_topology_and_the_tracker_say_one_number(
    case: str, tmp_path: Path, aiohttp_client: ClientFactory
) -> None:
    obj, podsets = CASES[case]()
    path = tmp_path / "workload.yaml"
    path.write_text(yaml.safe_dump(obj))
    figure, best = from_check(path)
    assert (figure, best) == EXPECTED[case], "the case is the one the issue describes"
    closest = f"; closest now: {best}" if best else ""

    mapped = tasgate("map", "-f", str(path))
    assert f"  must wait: {figure} (" in mapped.out, mapped.out
    line = next(x for x in mapped.out.splitlines() if x.startswith("  must wait: "))
    assert line.endswith(")" + closest), line
    html = tasgate("map", "-o", "html", "-f", str(path)).out
    assert f"<td>{figure} (" in html

    h = Harness()
    main, side = await aiohttp_client(h.app), await aiohttp_client(create_metrics_app(h.app))
    answer = await post(main, "/mutate", review(copy.deepcopy(obj)))
    assert answer["response"]["auditAnnotations"]["reason"] == "waits"
    text = await (await side.get("/topology", params={"format": "text"})).text()
    assert line in text.splitlines(), "/topology's text line is map's"
    page = await (await side.get("/topology")).text()
    assert f"<td>{figure} (" in page and (f"<td>{best}</td>" in page if best else True)

    state = h.app[STATE].current
    assert state is not None
    workload = {
        "metadata": {"name": obj["metadata"]["name"], "namespace": "default"},
        "spec": {"podSets": podsets},
    }
    view = workload_view(workload, state.pod_defaults("default"))
    assessed = assess(view, "default", "user-queue", state, load_policy("default"))
    waits = [p.waits for p in assessed.pod_sets if p.waits]
    assert len(waits) == 1 and figure in waits[0], waits
