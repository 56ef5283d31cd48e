"""Which Kueue the verdicts are for: its release and feature gates, read from Kueue's own
Deployment and ConfigMap as its release manifests and Helm chart leave them, and a warning on a
TAS verdict when they differ from what tasgate is proven against (Kueue v0.19.2, default gates).

The objects are Kueue v0.19.2's, rendered (see the headers of the two manifest files): its
release manifests by kustomize with the release's image tag, its Helm chart with a gate set.
"""

from __future__ import annotations

import asyncio
import copy
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.webhook.conftest import RACK, REPO, REQUIRED, job, judge, manifest, manifests
from tests.webhook.fakeapi import FakeApi
from webhook.decide.kueue.release import flipped
from webhook.decide.policy import Policy
from webhook.files.policy import load_policy
from webhook.files.sample import sample_objects
from webhook.files.sources import cluster_state
from webhook.live.holder import StateHolder
from webhook.live.kinds import kinds
from webhook.live.mirror import Mirror
from webhook.live.watch import WatchSettings, run_kind
from webhook.serve.app import create_app
from webhook.serve.keys import Settings, StateSource
from webhook.state.cluster import ClusterState, build_state
from webhook.state.kueue_proven import PLACEMENT_GATES, PROVEN_RELEASE

RELEASE = "kueue_release_v0.19.2.yaml"  # kustomize, image registry.k8s.io/kueue/kueue:v0.19.2
HELM = "kueue_release_helm.yaml"  # helm template, --feature-gates=TASBalancedPlacement=true
CONFIG_KEY = "controller_manager_config.yaml"

V17 = (
    "Kueue v0.17.0 runs here, but tasgate places as Kueue v0.19.2 does: v0.17.0 places multi-PodSet "
    "workloads and leader/worker groups differently (pods of earlier PodSets not counted, kueue#11287, "
    "fixed in v0.17.4)"
)
V15 = (
    "Kueue v0.15.0 runs here, but tasgate places as Kueue v0.19.2 does: v0.15.0 places unconstrained "
    "and implied-TAS PodSets differently (kueue#8157, fixed in v0.15.1)"
)
BALANCED = (  # a gate tasgate does not model: said, and kept from denying (`decide.kueue.gate_guard`)
    "Kueue v0.19.2 runs here with feature gate TASBalancedPlacement=true: tasgate does not model "
    "balanced placement: a preferred-topology PodSet may be placed elsewhere than it says, and no "
    "PodSet placed after one is denied"
)


def release_objects(name: str = RELEASE) -> tuple[dict[str, Any], dict[str, Any]]:
    """(ConfigMap, Deployment) of a rendered manifest file; fresh copies."""
    config, deployment = manifests(name)
    assert (config["kind"], deployment["kind"]) == ("ConfigMap", "Deployment")
    return config, deployment


def manager(deployment: dict[str, Any]) -> dict[str, Any]:
    (found,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "manager"]
    return found


def tagged(tag: str) -> list[dict[str, Any]]:
    """Kueue's release manifests with the manager's image at ``tag``."""
    config, deployment = release_objects()
    manager(deployment)["image"] = f"registry.k8s.io/kueue/kueue:{tag}"
    return [config, deployment]


def with_config(extra: str, deployment_tag: str = "v0.19.2") -> list[dict[str, Any]]:
    """Kueue's release manifests, its Configuration with ``extra`` YAML appended."""
    config, deployment = tagged(deployment_tag)
    config["data"][CONFIG_KEY] += extra
    return [config, deployment]


def state_with(objects: list[dict[str, Any]]) -> ClusterState:
    return build_state([*sample_objects(), *objects])


def fits(state: ClusterState, pol: Policy) -> Any:
    return judge(job(4, annotations={REQUIRED: RACK}), state, pol)


# --- read as Kueue's manifests leave them ---------------------------------------------------------


def test_release_manifests_read_as_v0_19_2_with_default_gates(none_policy: Policy) -> None:
    state = state_with(release_objects())
    release = state.kueue_release
    assert (release.version, release.gates, release.gates_from) == ("v0.19.2", {}, "")
    assert release.read_from == "image tag v0.19.2 of Deployment kueue-system/kueue-controller-manager"
    assert state.rejected == ()
    d = fits(state, none_policy)
    assert (d.allowed, d.reason, d.warnings) == (True, "fits", ())
    assert d.audit["kueue-release"] == "v0.19.2" and "kueue-gates" not in d.audit


def test_helm_chart_gates_are_read_from_the_feature_gates_flag(none_policy: Policy) -> None:
    state = state_with(release_objects(HELM))
    release = state.kueue_release
    assert (release.version, release.gates) == ("v0.19.2", {"TASBalancedPlacement": True})
    assert release.gates_from == "--feature-gates of Deployment kueue-system/kueue-controller-manager"
    d = fits(state, none_policy)
    assert d.warnings == (BALANCED,)
    assert d.audit["kueue-gates"] == "TASBalancedPlacement=true"


def test_an_image_pinned_by_digest_reads_the_charts_version_label() -> None:
    config, deployment = release_objects(HELM)
    manager(deployment)["image"] = "registry.k8s.io/kueue/kueue@sha256:" + "a" * 64
    release = build_state([config, deployment]).kueue_release
    assert release.version == "v0.19.2"
    assert release.read_from.startswith("label app.kubernetes.io/version v0.19.2 of Deployment")
    manager(deployment)["image"] = "registry.k8s.io/kueue/kueue:main"  # a branch: the label does not say
    assert build_state([config, deployment]).kueue_release.version is None


# --- the warning on a TAS verdict -----------------------------------------------------------------


def test_kueue_v0_17_is_said_on_every_tas_verdict(default_policy: Policy) -> None:
    state = state_with(tagged("v0.17.0"))
    admitted = fits(state, default_policy)
    denied = judge(manifest("jobset-never-fits.yaml"), state, default_policy)
    assert admitted.allowed and admitted.warnings[-1] == V17
    assert (denied.allowed, denied.reason, denied.warnings[-1]) == (False, "never-fits", V17)
    assert denied.audit["kueue-release"] == "v0.17.0"


def test_kueue_v0_15_is_said(none_policy: Policy) -> None:
    assert fits(state_with(tagged("v0.15.0")), none_policy).warnings == (V15,)


@pytest.mark.parametrize(
    ("tag", "said"),
    [
        ("v0.16.8", "v0.16.8 places multi-PodSet workloads"),  # kueue#11287, fixed in v0.16.9
        ("v0.17.4", "how v0.17.4 places is not measured"),  # its fix released
        ("v0.15.1", "how v0.15.1 places is not measured"),  # kueue#8157 fixed
        ("v0.20.1", "how v0.20.1 places is not measured"),
        ("v0.19.2-rc.1", "how v0.19.2-rc.1 places is not measured"),
    ],
)
def test_other_releases_are_said_as_kueues_changelog_knows_them(
    tag: str, said: str, none_policy: Policy
) -> None:
    (warning,) = fits(state_with(tagged(tag)), none_policy).warnings
    assert warning.startswith(f"Kueue {tag} runs here, but tasgate places as Kueue v0.19.2 does: {said}")


def test_a_placement_gate_flipped_in_the_configuration_is_said(none_policy: Policy) -> None:
    state = state_with(with_config("featureGates:\n  TASMultiLayerTopology: false\n"))
    assert state.kueue_release.gates_from == "featureGates of ConfigMap kueue-system/kueue-manager-config"
    d = fits(state, none_policy)
    assert d.warnings == (  # honoured (tests/webhook/test_kueue_gates.py)
        "Kueue v0.19.2 runs here with feature gate TASMultiLayerTopology=false: Kueue refuses the "
        "podset-slice-required-topology-constraints annotation, as tasgate does",
    )


def test_gates_at_their_defaults_or_not_placing_say_nothing(none_policy: Policy) -> None:
    gates = {"TASMultiLayerTopology": True, "TASBalancedPlacement": False, "PriorityBoost": True}
    extra = yaml.safe_dump({"featureGates": gates})
    d = fits(state_with(with_config(extra)), none_policy)
    assert (d.warnings, d.audit["kueue-release"]) == ((), "v0.19.2")


def test_all_alpha_reaches_the_alpha_placement_gates_a_named_gate_overrides() -> None:
    assert flipped({"AllAlpha": True, "TASRespectNodeAffinityPreferred": False}) == {
        "TASBalancedPlacement": True
    }
    assert flipped({"AllBeta": False}) == {
        name: False for name, gate in PLACEMENT_GATES.items() if gate.stage == "Beta"
    }


def test_an_unknown_release_adds_no_warning_and_the_audit_says_unknown(none_policy: Policy) -> None:
    for objects in ([], tagged("main")):
        state = state_with(objects)
        d = fits(state, none_policy)
        assert (d.warnings, d.audit["kueue-release"]) == ((), "unknown")
    assert state.kueue_release.describe() == (
        "unknown (image tag main of Deployment kueue-system/kueue-controller-manager names no Kueue release)"
    )


def test_gates_in_both_the_flag_and_the_configuration_read_unknown(none_policy: Policy) -> None:
    """Kueue v0.19.2 refuses to start so: no precedence to guess."""
    config, deployment = release_objects(HELM)
    config["data"][CONFIG_KEY] += "featureGates:\n  TASMultiLayerTopology: false\n"
    release = state_with([config, deployment]).kueue_release
    assert release.gates is None and "refuses to start" in release.note
    assert fits(state_with([config, deployment]), none_policy).warnings == ()


# --- what is not Kueue's, or not readable, is left out alone --------------------------------------


@pytest.mark.parametrize(
    "extra",
    ["featureGates: [\n", 'featureGates:\n  TASBalancedPlacement: "true"\n'],
    ids=["not-yaml", "not-booleans"],
)
def test_a_malformed_configuration_is_left_out_alone(extra: str, none_policy: Policy) -> None:
    state = state_with(with_config(extra, "v0.17.0"))
    (rejected,) = state.rejected
    assert (rejected.kind, rejected.qualified_name) == ("ConfigMap", "kueue-system/kueue-manager-config")
    assert rejected.path.startswith(f"data[{CONFIG_KEY}]")
    assert state.kueue_release.version == "v0.17.0" and state.kueue_release.gates is None
    d = fits(state, none_policy)  # judged as ever; the release still said
    assert (d.allowed, d.reason, d.warnings) == (True, "fits", (V17,))


def test_other_deployments_and_config_maps_are_not_read() -> None:
    viz = {  # KueueViz: Kueue's name label, neither control-plane nor a manager container
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "kueue-kueueviz-backend", "namespace": "kueue-system",
                     "labels": {"app.kubernetes.io/name": "kueue"}},
        "spec": {"template": {"spec": {"containers": [{"name": "backend", "image": "x:v0.1.0"}]}}},
    }  # fmt: skip
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d"},
             "data": {CONFIG_KEY: "featureGates: ["}}  # fmt: skip
    broken = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "b"}, "spec": []}
    state = build_state([viz, other, broken])
    assert state.rejected == () and state.kueue_release.version is None


def test_a_dump_of_the_documented_command_carries_the_release(tmp_path: Path) -> None:
    """``kubectl get … -o yaml`` writes a List: the release is read from it as from live objects."""
    listed = [*tagged("v0.17.0"), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}]
    (tmp_path / "core.yaml").write_text(yaml.safe_dump({"kind": "List", "items": list(sample_objects())}))
    (tmp_path / "kueue-release.yaml").write_text(yaml.safe_dump({"kind": "List", "items": listed}))
    assert cluster_state([str(tmp_path)]).kueue_release.version == "v0.17.0"


# --- proven against: one source of truth, held to the e2e pin and to Kueue's source ---------------


def test_the_proven_release_is_the_one_the_end_to_end_suite_runs() -> None:
    go_mod = (REPO / "e2e/tools/kueue/go.mod").read_text()
    pinned = re.search(r"^require sigs\.k8s\.io/kueue (v\S+)$", go_mod, re.M)
    assert pinned is not None and pinned.group(1) == PROVEN_RELEASE


# --- live mode: watched by label, a 403 leaves the release unknown and the replica ready ----------


DEPLOYMENTS = "/apis/apps/v1/namespaces/kueue-system/deployments"


@pytest.fixture
async def fake() -> AsyncIterator[FakeApi]:
    api = await FakeApi().start()
    yield api
    await api.close()


async def watched(fake: FakeApi) -> tuple[Mirror, list[asyncio.Task[None]]]:
    chosen = [k for k in kinds() if k.name in ("deployments", "configmaps")]
    assert all(k.kwargs == {"label_selector": "app.kubernetes.io/name=kueue"} and k.optional for k in chosen)
    mirror = Mirror(StateHolder(), [k.name for k in chosen])
    api = fake.client()
    settings = WatchSettings(watch_seconds=30, backoff_max=0.05, absent_retry=0.05)
    return mirror, [asyncio.create_task(run_kind(api, k, mirror, settings)) for k in chosen]


async def until(check: Any, seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out")


async def test_live_mode_reads_the_release_and_follows_a_new_image(fake: FakeApi) -> None:
    config, deployment = tagged("v0.17.0")
    fake.put("/api/v1/namespaces/kueue-system/configmaps", config)
    fake.put(DEPLOYMENTS, deployment)
    fake.put("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "not-kueue"}, "data": {}})
    mirror, tasks = await watched(fake)
    try:
        await until(lambda: mirror.ready and mirror.build().kueue_release.version == "v0.17.0")
        assert [key for key in mirror.raw["configmaps"]] == ["kueue-system/kueue-manager-config"]
        status = copy.deepcopy(fake.get(f"{DEPLOYMENTS}/kueue-controller-manager"))
        assert status is not None
        fake.put(DEPLOYMENTS, {**status, "status": {"replicas": 1}})
        await asyncio.sleep(0.2)
        mirror.structure_changed = False
        fake.put(DEPLOYMENTS, {**status, "status": {"replicas": 2}})
        await asyncio.sleep(0.2)
        assert not mirror.structure_changed  # a status update is no rebuild
        manager(status)["image"] = "registry.k8s.io/kueue/kueue:v0.19.2"
        fake.put(DEPLOYMENTS, status)
        await until(lambda: mirror.build().kueue_release.version == "v0.19.2")
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_live_mode_without_rbac_for_them_is_ready_and_unknown(fake: FakeApi) -> None:
    fake.fail("GET", "/configmaps", 403, times=1000)
    fake.fail("GET", "/deployments", 403, times=1000)
    mirror, tasks = await watched(fake)
    try:
        await until(lambda: mirror.ready)
        assert mirror.build().kueue_release.version is None
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_readyz_says_a_kueue_tasgate_is_not_proven_against(aiohttp_client: Any) -> None:
    """Ready all the same (verdicts come, each saying it), with the release in the note."""
    objects = [*sample_objects(), *tagged("v0.17.0")]
    app = create_app(Settings(policy=load_policy("default")), lambda _: None, StateSource(objects=objects))
    client = await aiohttp_client(app)
    response = await client.get("/readyz")
    text = await response.text()
    assert response.status == 200 and text.startswith("ok; Kueue v0.17.0 runs here"), text
    proven = create_app(
        Settings(policy=load_policy("default")), lambda _: None, StateSource(objects=sample_objects())
    )
    assert await (await (await aiohttp_client(proven)).get("/readyz")).text() == "ok"
