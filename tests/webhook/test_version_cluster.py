"""`tasgate version --kubeconfig` says which Kueue the cluster runs and with which gates, as live
mode reads them (Kueue's own Deployment and ConfigMap, by label), and the line each verdict would
carry; without a cluster it says what it always said, and an API server it cannot reach is one
error line and exit code 2, never a traceback.

The objects are Kueue v0.19.2's release manifests (tests/webhook/manifests), served by the fake
API server; the command is the installed ``tasgate``, as a user runs it.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.webhook.conftest import manifests
from tests.webhook.fakeapi import FakeApi
from tests.webhook.test_kubeconfig import cli, kubeconfig

DEPLOYMENTS = "/apis/apps/v1/namespaces/kueue-system/deployments"
CONFIG_MAPS = "/api/v1/namespaces/kueue-system/configmaps"
CONFIG_KEY = "controller_manager_config.yaml"
DIFFERS = (
    "Kueue v0.19.2 runs here with feature gate TASProfileMixed=false: unconstrained PodSets are "
    "placed BestFit, as tasgate places them"
)


@pytest.fixture
async def fake() -> AsyncIterator[FakeApi]:
    api = await FakeApi().start()
    yield api
    await api.close()


def serve_kueue(api: FakeApi, extra_config: str = "") -> None:
    """Kueue v0.19.2's release manifests (kustomize), its Configuration with ``extra_config``."""
    config, deployment = manifests("kueue_release_v0.19.2.yaml")
    config["data"][CONFIG_KEY] += extra_config
    api.put(CONFIG_MAPS, config)
    api.put(DEPLOYMENTS, deployment)


def env_for(api: FakeApi, tmp_path: Path) -> dict[str, str]:
    assert api.server is not None
    url = str(api.server.make_url("")).rstrip("/")
    return {"KUBECONFIG": str(kubeconfig(tmp_path / "config", "fake", {"fake": (url, "default")}))}


async def test_it_says_the_clusters_kueue_and_gates_in_text_json_and_yaml(
    fake: FakeApi, tmp_path: Path
) -> None:
    serve_kueue(fake, "featureGates:\n  TASProfileMixed: false\n")
    env = env_for(fake, tmp_path)
    run = await cli(env, "version", "--live")
    assert (run.code, run.err) == (0, ""), run.err
    assert run.out.splitlines()[3:] == [
        "Cluster Kueue: v0.19.2 (image tag v0.19.2 of Deployment kueue-system/kueue-controller-manager)",
        "Cluster feature gates: TASProfileMixed=false"
        " (featureGates of ConfigMap kueue-system/kueue-manager-config)",
        f"Differs: {DIFFERS}",
    ]
    doc = json.loads((await cli(env, "version", "--kubeconfig", env["KUBECONFIG"], "-o", "json")).out)
    cluster = doc["cluster"]
    assert (cluster["kueue"], cluster["gates"], cluster["differs"]) == (
        "v0.19.2",
        {"TASProfileMixed": False},
        DIFFERS,
    )
    assert cluster["placementGates"] == {"TASProfileMixed": False} and cluster["refused"] == []
    assert yaml.safe_load((await cli(env, "version", "--live", "-o", "yaml")).out) == doc


async def test_default_gates_say_no_difference_and_gates_kueue_refuses_are_said(
    fake: FakeApi, tmp_path: Path
) -> None:
    serve_kueue(fake)
    env = env_for(fake, tmp_path)
    lines = (await cli(env, "version", "--live")).out.splitlines()
    assert lines[4:] == ["Cluster feature gates: Kueue's defaults", "Differs: -"]
    fake.put(CONFIG_MAPS, _with_config("featureGates:\n  TopologyAwareScheduling: false\n"))
    doc = json.loads((await cli(env, "version", "--live", "-o", "json")).out)["cluster"]
    assert doc["refused"][0] == "cannot use a TAS profile with TAS disabled", doc  # Kueue exits at start
    assert doc["differs"].endswith(
        "and admits nothing; tasgate places as Kueue v0.19.2 does with its default gates"
    )


def _with_config(extra: str) -> dict[str, Any]:
    config, _ = manifests("kueue_release_v0.19.2.yaml")
    config["data"][CONFIG_KEY] += extra
    return config


async def test_without_a_cluster_it_reads_none(fake: FakeApi, tmp_path: Path) -> None:
    """$KUBECONFIG alone never turns `version` into a call to a cluster (as `check`)."""
    serve_kueue(fake)
    run = await cli(env_for(fake, tmp_path), "version", "-o", "json")
    assert run.code == 0 and "cluster" not in json.loads(run.out)
    assert fake.requests == []


async def test_kueue_objects_it_may_not_read_leave_the_release_unknown(fake: FakeApi, tmp_path: Path) -> None:
    serve_kueue(fake)
    fake.fail("GET", "/deployments", 403, times=10)
    run = await cli(env_for(fake, tmp_path), "version", "--live")
    assert run.code == 0, run.err
    assert run.out.splitlines()[3:] == [
        "Cluster Kueue: unknown (not read)",
        "Cluster feature gates: unknown",
        "Differs: -",
    ]


async def test_an_unreachable_api_server_is_one_error_line(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "config", "away", {"away": ("http://127.0.0.1:9", "")})
    run = await cli({"KUBECONFIG": os.devnull}, "version", "--kubeconfig", str(path))
    assert run.code == 2 and run.out == ""
    assert run.err.startswith("tasgate: error: listing deployments: Cannot connect to host 127.0.0.1:9")
    assert "Traceback" not in run.err and len(run.err.splitlines()) == 1
