"""The deployment manifests agree with the code they deploy."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from e2e.shared import shared_dir
from webhook.decide.policy import KUEUE_USERS
from webhook.decide.policy_text import parse_policy
from webhook.files.policy import load_policy

ROOT = Path(__file__).resolve().parents[2]
WEBHOOKS = ROOT / "manifests" / "webhooks" / "webhooks.yaml"
BASE = ROOT / "manifests" / "base"
CRDS = shared_dir() / "crds"


def test_policy_configmap_is_the_shipped_default() -> None:
    copy = (ROOT / "manifests" / "base" / "policy.yaml").read_text()
    shipped = (ROOT / "webhook" / "data" / "default-policy.yaml").read_text()
    assert copy == shipped
    assert parse_policy(copy, "manifests") == load_policy("default")


def test_webhooks_follow_the_admission_contract() -> None:
    docs = list(yaml.safe_load_all(WEBHOOKS.read_text()))
    assert [d["kind"] for d in docs] == ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
    for doc in docs:
        (hook,) = doc["webhooks"]
        assert len(hook["name"].split(".")) == 3
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["sideEffects"] == "NoneOnDryRun"
        assert 1 <= hook["timeoutSeconds"] <= 30 and hook["failurePolicy"] in ("Fail", "Ignore")
        excluded = hook["namespaceSelector"]["matchExpressions"][0]["values"]
        assert "kube-system" in excluded and "tasgate-system" in excluded
        resources = {r for rule in hook["rules"] for r in rule["resources"]}
        assert {
            "jobs",
            "jobsets",
            "pytorchjobs",
            "mpijobs",
            "leaderworkersets",
            "rayjobs",
            "trainjobs",
        } <= resources
        assert hook["matchConditions"]


def test_deployment_is_hardened() -> None:
    deployment = yaml.safe_load((ROOT / "manifests" / "base" / "deployment.yaml").read_text())
    spec = deployment["spec"]
    assert spec["replicas"] >= 2
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["resources"]["requests"]
    assert pod["affinity"]["podAntiAffinity"]


def test_match_conditions_skip_exactly_the_children_the_code_skips() -> None:
    """The webhook's owner rule and the decision's (``owned_by_workload``) name the same kinds."""
    from webhook.model.workloads.registry import ADAPTERS  # noqa: PLC0415 - the code's one list

    wanted = {f"{version}/{kind}" for version, kind in ADAPTERS if kind != "Pod"}
    docs = list(yaml.safe_load_all(WEBHOOKS.read_text()))
    for doc in docs:
        (hook,) = doc["webhooks"]
        (owned,) = [c for c in hook["matchConditions"] if c["name"] == "not-owned-by-a-judged-workload"]
        listed = set(re.findall(r"'([a-z][^']*/[A-Z][A-Za-z]*)'", owned["expression"]))
        assert listed == wanted


KUEUE_CONDITION = "not-an-update-by-kueue"


def kueue_exemption(users: tuple[str, ...]) -> str:
    """The one CEL expression that lets ``users``' UPDATEs through without calling tasgate."""
    listed = ", ".join(f"'{user}'" for user in users)
    return f"request.operation != 'UPDATE' || !(request.userInfo.username in [{listed}])"


def test_kueues_updates_skip_both_webhooks_for_exactly_the_policys_kueue_users() -> None:
    """One list of who Kueue is: the policy's ``kueueUsers`` (which the decision checks too).

    A name added to the policy but not to the matchCondition would leave that Kueue blocked by an
    outage of tasgate; one added only to the matchCondition would let it start gangs unjudged by
    a tasgate whose own check says otherwise. The expression is compared whole, so a drift in its
    form (another operation, another field) fails here too, not only a drift in the names.
    """
    base = parse_policy((BASE / "policy.yaml").read_text(), "manifests")
    users = base.kueue_users
    assert users == load_policy("default").kueue_users == KUEUE_USERS
    for doc in yaml.safe_load_all(WEBHOOKS.read_text()):
        (hook,) = doc["webhooks"]
        (condition,) = [c for c in hook["matchConditions"] if c["name"] == KUEUE_CONDITION]
        assert " ".join(condition["expression"].split()) == kueue_exemption(users), doc["kind"]


def kustomization(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((path / "kustomization.yaml").read_text())
    return loaded


def rendered_kinds(directory: Path) -> list[str]:
    """The kinds a kustomization's resources and components hold, following directories (no kubectl)."""
    kinds = []
    listed = kustomization(directory)
    for entry in [*listed.get("resources", []), *listed.get("components", [])]:
        target = (directory / entry).resolve()
        if target.is_dir():
            kinds.extend(rendered_kinds(target))
        else:
            kinds.extend(d["kind"] for d in yaml.safe_load_all(target.read_text()) if d)
    return kinds


def test_the_base_registers_no_webhook_and_each_certificate_overlay_does() -> None:
    """A webhook with failurePolicy Fail and no way to trust it would refuse every Job."""
    webhook_kinds = {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
    assert not webhook_kinds & set(rendered_kinds(ROOT / "manifests"))
    assert not webhook_kinds & set(rendered_kinds(BASE))
    for overlay in ("cert-manager", "tasgate-certs"):
        kinds = rendered_kinds(ROOT / "manifests" / "overlays" / overlay)
        assert webhook_kinds <= set(kinds), overlay
        assert "Deployment" in kinds


def container() -> dict[str, Any]:
    deployment = yaml.safe_load((BASE / "deployment.yaml").read_text())
    (found,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(found)


def test_fail_closed_is_chosen_once_and_consistently() -> None:
    """failurePolicy Fail (tasgate unreachable) and --on-timeout=deny (tasgate cannot decide)."""
    policies = {d["webhooks"][0]["failurePolicy"] for d in yaml.safe_load_all(WEBHOOKS.read_text())}
    assert policies == {"Fail"}
    assert "--on-timeout=deny" in container()["args"]


def test_shutdown_fits_the_grace_period() -> None:
    deployment = yaml.safe_load((BASE / "deployment.yaml").read_text())
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    args = dict(a.removeprefix("--").split("=", 1) for a in container()["args"] if "=" in a)
    assert float(args["drain-seconds"]) + float(args["grace-seconds"]) + 1 < grace


def test_ports_probes_and_network_policy_agree() -> None:
    c = container()
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"https": 8443, "metrics": 9090}
    assert "--port=8443" in c["args"] and "--metrics-port=9090" in c["args"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"]["port"] == "https" and c[probe]["httpGet"]["scheme"] == "HTTPS"
    policy = yaml.safe_load((BASE / "networkpolicy.yaml").read_text())
    assert policy["spec"]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "tasgate"}
    webhook, metrics = policy["spec"]["ingress"]
    assert webhook["ports"] == [{"protocol": "TCP", "port": 8443}] and "from" not in webhook
    assert metrics["ports"] == [{"protocol": "TCP", "port": 9090}]
    assert metrics["from"][0]["namespaceSelector"]["matchLabels"]
    assert "networkpolicy.yaml" in kustomization(BASE)["resources"]


def test_scale_subresources_are_gated_exactly_where_the_crds_serve_one() -> None:
    """`kubectl scale` must not walk around the gate; the rules name what the CRDs define."""
    served = set()
    for crd in sorted(CRDS.glob("*.yaml")):
        doc = yaml.safe_load(crd.read_text())
        if any((v.get("subresources") or {}).get("scale") for v in doc["spec"]["versions"]):
            served.add(f"{doc['spec']['group']}/{doc['spec']['names']['plural']}/scale")
    assert served, f"no CRDs in {CRDS}"
    from webhook.serve.scale import SCALE_PATHS  # noqa: PLC0415 - the server's own table

    assert {f"{group}/{plural}/scale" for group, plural in SCALE_PATHS} == served
    for doc in yaml.safe_load_all(WEBHOOKS.read_text()):
        (hook,) = doc["webhooks"]
        listed = {
            f"{group}/{resource}"
            for rule in hook["rules"]
            for group in rule["apiGroups"]
            for resource in rule["resources"]
            if resource.endswith("/scale")
        }
        assert listed == served, doc["kind"]


def test_dockerignore_keeps_secrets_and_caches_out_of_the_image_context() -> None:
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".venv", ".dev-certs", "*.pem", "**/certs", "build", ".git"} <= ignored
