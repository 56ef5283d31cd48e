"""charts/tasgate against the kustomize manifests and the real API server (``make e2e``).

The chart and the manifests are two recipes for one installation: each values set below renders,
object by object, what ``kubectl kustomize`` renders of its overlay (Helm's bookkeeping labels
aside). Then ``helm lint``, a server-side dry run of the rendered chart, and ``helm install`` /
``upgrade`` / ``uninstall`` against this suite's kube-apiserver. ``helm install --wait`` needs pods
that become Ready, which no kubelet makes here: it runs in ``make e2e-cluster``
(tests/e2e_cluster/test_helm_install.py). helm and kubectl missing fail, never skip.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import prometheus_operator
from e2e.controlplane import ControlPlane, find_binaries
from e2e.helm import CHART, NAMESPACE, ROOT, Helm, differences, value_flags
from e2e.kueue_source import install_crds
from tests.e2e.install_image import IMAGE, IMAGE_VALUES, with_image
from webhook.serve import certs

pytestmark = pytest.mark.e2e

NS = ("Namespace", "", NAMESPACE)  # kustomize creates it; Helm installs into it (--create-namespace)
CERT_OBJECTS = [("Issuer", NAMESPACE, "tasgate-selfsigned"), ("Certificate", NAMESPACE, "tasgate")]
TLS_SECRET = ("Secret", NAMESPACE, "tasgate-tls")
CA_MAP = ("ConfigMap", NAMESPACE, "tasgate-ca-bundle")  # kustomize's replacement source, left in its output
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def kustomize(directory: Path) -> list[dict[str, Any]]:
    argv = [str(find_binaries().kubectl), "kustomize", str(directory)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}"
    return [d for d in yaml.safe_load_all(done.stdout) if d]


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """helm whose ``template`` always names the image, as every install must (the chart refuses
    the placeholder: tests/e2e/test_install_image.py)."""
    return with_image(Helm(tmp_path_factory.mktemp("helm")))


@pytest.fixture(scope="module")
def manifests(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of manifests/ with the files the install reads (the image, and the tasgate-certs
    overlay's certificates, as docs/install.md makes them) and overlays that add the priority-class
    and pod-info components to the cert-manager overlay."""
    copy = tmp_path_factory.mktemp("kustomize") / "manifests"
    shutil.copytree(ROOT / "manifests", copy, symlinks=True)
    (copy / "image" / "image.env").write_text(f"image={IMAGE}\n")
    overlay = copy / "overlays" / "tasgate-certs"
    files = certs.generate(overlay / "certs", [f"tasgate.{NAMESPACE}.svc"])
    (overlay / "ca-bundle.env").write_text(f"caBundle={certs.ca_bundle(files.ca_cert)}\n")
    critical = copy / "overlays" / "critical"
    critical.mkdir()
    (critical / "kustomization.yaml").write_text(
        "resources: [../cert-manager]\ncomponents: [../../components/system-cluster-critical]\n"
    )
    pod_info = copy / "overlays" / "pod-info"
    pod_info.mkdir()
    (pod_info / "kustomization.yaml").write_text(
        "resources: [../cert-manager]\ncomponents: [../../components/pod-info-metrics]\n"
    )
    workers = copy / "overlays" / "multikueue-workers"
    workers.mkdir()
    (workers / "kustomization.yaml").write_text(
        "resources: [../cert-manager]\ncomponents: [../../components/multikueue-workers]\n"
    )
    return copy


def assert_same(chart: list[dict[str, Any]], kustomized: list[dict[str, Any]], **known: Any) -> None:
    problems = differences(chart, kustomized, **known)
    assert not problems, "chart and kustomize disagree:\n" + "\n".join(problems)


def test_chart_without_webhooks_renders_the_base(helm: Helm, manifests: Path) -> None:
    """`kubectl apply -k manifests/`: everything but the webhooks and a certificate."""
    chart = helm.template(*value_flags({"webhooks.enabled": "false", "certificates.mode": "provided"}))
    assert_same(chart, kustomize(manifests), kustomize_only=[NS])
    assert not {d["kind"] for d in chart} & {*WEBHOOK_KINDS, "Secret"}


def test_cert_manager_values_render_the_cert_manager_overlay(helm: Helm, manifests: Path) -> None:
    chart = helm.template(*value_flags({"certificates.mode": "cert-manager"}))
    kustomized = kustomize(manifests / "overlays" / "cert-manager")
    assert_same(chart, kustomized, kustomize_only=[NS], unlabelled=CERT_OBJECTS)


def test_provided_certificates_render_the_tasgate_certs_overlay(helm: Helm, manifests: Path) -> None:
    """The same `tasgate certs` files through --set-file: byte-identical Secret and caBundles."""
    overlay = manifests / "overlays" / "tasgate-certs"
    files = {
        f"certificates.{k}": overlay / "certs" / n for k, n in (("tlsCrt", "tls.crt"), ("tlsKey", "tls.key"))
    }
    files["certificates.caCrt"] = overlay / "certs" / "ca.crt"
    chart = helm.template(*value_flags({"certificates.mode": "provided"}, files))
    assert_same(chart, kustomize(overlay), kustomize_only=[NS, CA_MAP], unlabelled=[TLS_SECRET])


def test_default_values_generate_a_certificate_the_webhooks_trust(helm: Helm, manifests: Path) -> None:
    """self-signed (the default): the tasgate-certs overlay's objects, with a CA and serving pair of
    the chart's own making, for the Service's names, that both caBundles carry."""
    chart = helm.template()
    kustomized = kustomize(manifests / "overlays" / "tasgate-certs")
    secret = next(d for d in chart if d["kind"] == "Secret")
    ca = base64.b64decode(secret["data"]["ca.crt"])
    for hook in (d for d in chart if d["kind"] in WEBHOOK_KINDS):
        assert base64.b64decode(hook["webhooks"][0]["clientConfig"]["caBundle"]) == ca, hook["kind"]
    cert_file = manifests.parent / "generated.crt"
    cert_file.write_bytes(base64.b64decode(secret["data"]["tls.crt"]))
    described = certs.describe(cert_file)
    assert described["dns_names"] == [f"tasgate.{NAMESPACE}.svc", f"tasgate.{NAMESPACE}.svc.cluster.local"]
    # Beyond the certificate bytes (and the chart's ca.crt and names annotation), the same objects.
    theirs = next(d for d in kustomized if d["kind"] == "Secret")
    secret["data"] = {k: theirs["data"][k] for k in ("tls.crt", "tls.key")}
    secret["metadata"].pop("annotations")
    for hook, their_hook in zip(
        (d for d in chart if d["kind"] in WEBHOOK_KINDS),
        (d for d in kustomized if d["kind"] in WEBHOOK_KINDS),
        strict=True,
    ):
        hook["webhooks"][0]["clientConfig"]["caBundle"] = their_hook["webhooks"][0]["clientConfig"][
            "caBundle"
        ]
    assert_same(chart, kustomized, kustomize_only=[NS, CA_MAP], unlabelled=[TLS_SECRET])


def test_monitoring_values_render_the_monitoring_overlay(helm: Helm) -> None:
    chart = helm.template(*value_flags({"monitoring.enabled": "true"}))
    monitoring = [
        d for d in chart if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "monitoring"
    ]
    assert {d["kind"] for d in monitoring} == {"ServiceMonitor", "PrometheusRule", "ConfigMap"}
    kustomized = kustomize(ROOT / "manifests" / "overlays" / "monitoring")
    assert_same(monitoring, kustomized)
    # monitoring.runbookURL rebases every runbook link, keeping its anchor (the alert's heading).
    base = "https://git.example/tasgate/blob/main/docs/runbooks.md"
    moved = helm.template(*value_flags({"monitoring.enabled": "true", "monitoring.runbookURL": base}))

    def links(objs: list[dict[str, Any]]) -> dict[str, str]:
        (rule,) = [o for o in objs if o["kind"] == "PrometheusRule"]
        return {
            r["alert"]: r["annotations"]["runbook_url"]
            for g in rule["spec"]["groups"]
            for r in g["rules"]
            if "alert" in r
        }

    theirs = links(kustomized)
    assert theirs and links(moved) == {a: base + "#" + u.partition("#")[2] for a, u in theirs.items()}


def test_priority_class_values_render_the_component(helm: Helm, manifests: Path) -> None:
    values = {
        "certificates.mode": "cert-manager",
        "priorityClassName": "system-cluster-critical",
        "priorityClassQuota.enabled": "true",
    }
    chart = helm.template(*value_flags(values))
    assert_same(
        chart, kustomize(manifests / "overlays" / "critical"), kustomize_only=[NS], unlabelled=CERT_OBJECTS
    )


def test_pod_info_value_renders_the_component(helm: Helm, manifests: Path) -> None:
    """monitoring.podInfoMetrics adds --pod-info-metrics as components/pod-info-metrics does."""
    chart = helm.template(
        *value_flags({"certificates.mode": "cert-manager", "monitoring.podInfoMetrics": "true"})
    )
    kustomized = kustomize(manifests / "overlays" / "pod-info")
    assert_same(chart, kustomized, kustomize_only=[NS], unlabelled=CERT_OBJECTS)
    (deployment,) = [d for d in chart if d["kind"] == "Deployment"]
    assert "--pod-info-metrics" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    (default,) = [d for d in helm.template() if d["kind"] == "Deployment"]
    assert "--pod-info-metrics" not in default["spec"]["template"]["spec"]["containers"][0]["args"]


def test_multikueue_value_renders_the_component(helm: Helm, manifests: Path) -> None:
    """multikueue.workers adds the flags and the Secret-reading Role in Kueue's namespace, as
    components/multikueue-workers does."""
    chart = helm.template(*value_flags({"certificates.mode": "cert-manager", "multikueue.workers": "true"}))
    assert_same(chart, kustomize(manifests / "overlays" / "multikueue-workers"), kustomize_only=[NS],
                unlabelled=CERT_OBJECTS)  # fmt: skip
    (role,) = [
        d for d in chart if d["kind"] == "Role" and d["metadata"]["name"] == "tasgate-multikueue-workers"
    ]
    assert role["metadata"]["namespace"] == "kueue-system" and role["rules"][0]["verbs"] == ["get"]
    assert not [d for d in helm.template() if d["metadata"]["name"] == "tasgate-multikueue-workers"]


def test_straggler_ratio_value_sets_only_the_threshold_rule(helm: Helm) -> None:
    def rules(*flags: str) -> list[dict[str, Any]]:
        (rule,) = [
            d for d in helm.template("--set=monitoring.enabled=true", *flags) if d["kind"] == "PrometheusRule"
        ]
        return [r for g in rule["spec"]["groups"] for r in g["rules"]]

    shipped, moved = rules(), rules("--set-json=monitoring.stragglerRatio=0.3")
    changed = [(a, b) for a, b in zip(shipped, moved, strict=True) if a != b]
    assert [(a["record"], a["expr"], b["expr"]) for a, b in changed] == [
        ("tasgate:gang_gpu_straggler:threshold_ratio", "vector(0.5)", "vector(0.3)")
    ]


def test_kueue_users_reach_the_match_conditions_and_the_policy(helm: Helm) -> None:
    """One list: a second Kueue identity is exempted by both webhooks and written into the policy."""
    users = ["system:serviceaccount:kueue-system:kueue-controller-manager", "system:serviceaccount:q:kueue"]
    chart = helm.template(f"--set-json=kueueUsers={json.dumps(users)}")
    policy = yaml.safe_load(
        next(d for d in chart if d["metadata"]["name"] == "tasgate-policy")["data"]["policy.yaml"]
    )
    assert policy["spec"]["kueueUsers"] == users
    listed = ", ".join(f"'{u}'" for u in users)
    for hook in (d for d in chart if d["kind"] in WEBHOOK_KINDS):
        (condition,) = [
            c for c in hook["webhooks"][0]["matchConditions"] if c["name"] == "not-an-update-by-kueue"
        ]
        assert (
            condition["expression"]
            == f"request.operation != 'UPDATE' || !(request.userInfo.username in [{listed}])"
        )
    own = yaml.safe_dump({"spec": {"kueueUsers": users[:1]}})
    refused = helm.run(
        "template",
        "t",
        str(CHART),
        *value_flags(IMAGE_VALUES),
        f"--set-json=kueueUsers={json.dumps(users)}",
        f"--set-json=policy={json.dumps(own)}",
        check=False,
    )
    assert refused.returncode != 0 and "kueueUsers" in refused.stderr, refused.stderr


def test_helm_lint_passes_for_every_values_set(helm: Helm, tmp_path: Path) -> None:
    for values in (
        {},
        {"certificates.mode": "cert-manager", "monitoring.enabled": "true"},
        {"webhooks.enabled": "false", "certificates.mode": "provided"},
        {"priorityClassName": "system-cluster-critical", "priorityClassQuota.enabled": "true"},
        {"image.digest": "sha256:" + "0" * 64},
        {"monitoring.enabled": "true", "monitoring.podInfoMetrics": "true"},
    ):
        flags = value_flags({**IMAGE_VALUES, **values})
        done = helm.run("lint", "--strict", str(CHART), *flags, check=False)
        assert done.returncode == 0, f"helm lint {values}:\n{done.stdout}\n{done.stderr}"
    for wrong in ("certificates.mode=acme", "image.digest=latest", "onTimeout=maybe", "replica=3"):
        image = value_flags(IMAGE_VALUES)
        bad = helm.run("lint", "--strict", str(CHART), *image, "--set", wrong, check=False)
        assert bad.returncode != 0, f"values.schema.json must refuse {wrong}: {bad.stdout}"


@pytest.fixture(scope="module")
def cp() -> Iterator[ControlPlane]:
    with ControlPlane() as running:
        yield running


def test_rendered_chart_passes_a_server_side_dry_run(cp: ControlPlane, helm: Helm) -> None:
    """Every object of the chart, monitoring included (against the Prometheus Operator's CRDs);
    cert-manager's Issuer and Certificate kinds are not installed here, so those two are only rendered."""
    cp.kubectl("create", "namespace", NAMESPACE, check=False)
    install_crds(cp, prometheus_operator.crd_files())
    for values in ({"monitoring.enabled": "true"}, {"certificates.mode": "cert-manager"}):
        rendered = [
            d
            for d in helm.template(*value_flags(values))
            if not d["apiVersion"].startswith("cert-manager.io/")
        ]
        result = cp.kubectl(
            "apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all(rendered), check=False
        )
        assert result.returncode == 0, f"{values}: {result.stderr}"
        for kind in (
            "deployment.apps/tasgate",
            *(f"{k.lower()}.admissionregistration.k8s.io/tasgate" for k in WEBHOOK_KINDS),
        ):
            assert f"{kind} created (server dry run)" in result.stdout, result.stdout


def test_helm_install_upgrade_and_uninstall_on_the_api_server(cp: ControlPlane, tmp_path: Path) -> None:
    """Without --wait (no kubelet makes pods Ready here): the release's objects are stored, an
    upgrade keeps the generated CA (lookup), and uninstall removes the webhooks with the rest."""
    helm = Helm(tmp_path, kubeconfig=cp.kubeconfig)
    ns = "tasgate-helm"
    image = value_flags(IMAGE_VALUES)
    helm.run("install", "tasgate", str(CHART), "-n", ns, "--create-namespace", *image)
    secret = cp.kubectl_json("get", "secret", "tasgate-tls", "-n", ns)
    hook = cp.kubectl_json("get", "validatingwebhookconfiguration", "tasgate")
    assert hook["webhooks"][0]["clientConfig"]["service"]["namespace"] == ns
    assert base64.b64decode(hook["webhooks"][0]["clientConfig"]["caBundle"]) == base64.b64decode(
        secret["data"]["ca.crt"]
    )
    helm.run("upgrade", "tasgate", str(CHART), "-n", ns, *image, "--set", "replicas=3")
    assert cp.kubectl_json("get", "deployment", "tasgate", "-n", ns)["spec"]["replicas"] == 3
    kept = cp.kubectl_json("get", "secret", "tasgate-tls", "-n", ns)
    assert kept["data"] == secret["data"], "an upgrade must keep the CA the webhooks trust"
    helm.run("uninstall", "tasgate", "-n", ns)
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration", "clusterrole"):
        gone = cp.kubectl("get", kind, "tasgate", check=False)
        assert gone.returncode != 0 and "NotFound" in gone.stderr, f"{kind} left behind: {gone.stdout}"
