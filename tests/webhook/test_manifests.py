"""The deployment manifests agree with the code they deploy."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from webhook.decide.policy import parse_policy
from webhook.files.policy import load_policy

ROOT = Path(__file__).resolve().parents[2]


def test_policy_configmap_is_the_shipped_default() -> None:
    copy = (ROOT / "manifests" / "base" / "policy.yaml").read_text()
    shipped = (ROOT / "webhook" / "data" / "default-policy.yaml").read_text()
    assert copy == shipped
    assert parse_policy(copy, "manifests") == load_policy("default")


def test_webhooks_follow_the_admission_contract() -> None:
    docs = list(yaml.safe_load_all((ROOT / "manifests" / "base" / "webhooks.yaml").read_text()))
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
    docs = list(yaml.safe_load_all((ROOT / "manifests" / "base" / "webhooks.yaml").read_text()))
    for doc in docs:
        (hook,) = doc["webhooks"]
        (owned,) = [c for c in hook["matchConditions"] if c["name"] == "not-owned-by-a-judged-workload"]
        listed = set(re.findall(r"'([a-z][^']*/[A-Z][A-Za-z]*)'", owned["expression"]))
        assert listed == wanted
