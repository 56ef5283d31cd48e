"""The monitoring overlay: rules that promtool accepts and whose alerts fire when they should, a
dashboard and alerts that query only metrics tasgate exports. That its kustomization builds is an
e2e test (tests/e2e/test_monitoring_overlay.py): it runs the e2e build's kubectl."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestClient

from tests.webhook import promql
from tests.webhook.monitoring import external_metrics
from tests.webhook.overlay import (
    ROOT,
    dashboard,
    dashboard_queries,
    missing_report,
    queried_metrics,
    rule_spec,
    scraped_names,
)
from tests.webhook.test_server import (
    ClientFactory,
    Harness,
    manifest,
    through_both,
)
from webhook.serve.app import create_metrics_app

Client = TestClient[web.Request, web.Application]
ALERT_TESTS = Path(__file__).parent / "monitoring" / "alerts.test.yaml"
ENSURE = "bash hack/ensure-promtool.sh"


@pytest.fixture
def served() -> Harness:
    """The webhook app on the sample cluster, with its audit lines kept (test_server's Harness)."""
    return Harness()


@pytest.fixture
async def api(served: Harness, aiohttp_client: ClientFactory) -> Client:
    return await aiohttp_client(served.app)


@pytest.fixture(scope="module")
def promtool() -> str:
    """promtool from $PROMTOOL or PATH; missing is a failure (`make test` installs it first)."""
    found = shutil.which(os.environ.get("PROMTOOL", "promtool"))
    if found is None:
        pytest.fail(f"promtool is missing: run `{ENSURE}` (installs Debian's prometheus package)")
    return found


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}"
    return done


def test_rules_pass_promtool_check(promtool: str, tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule_spec()))
    out = run([promtool, "check", "rules", "rules.yaml"], tmp_path).stdout
    rules = [r.get("alert") or r["record"] for g in rule_spec()["groups"] for r in g["rules"]]
    assert f"SUCCESS: {len(rules)} rules found" in out


def test_alerts_fire_on_their_input_series_and_only_then(promtool: str, tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule_spec()))
    shutil.copy(ALERT_TESTS, tmp_path / "alerts.test.yaml")
    assert "SUCCESS" in run([promtool, "test", "rules", "alerts.test.yaml"], tmp_path).stdout
    tested = {
        case["alertname"]
        for t in yaml.safe_load(ALERT_TESTS.read_text())["tests"]
        for case in t["alert_rule_test"]
    }
    main = {
        "TasgateGangPartialStart",
        "TasgateGangNeverFits",
        "TasgatePredictionMismatch",
        "TasgateWebhookErrors",
        "TasgateWebhookLatencyHigh",
        "TasgateCertificateExpiresSoon",
        "TasgateCertificateExpired",
        "TasgateClusterStateStale",
        "TasgateReplicaDown",
        "TasgateDown",
        "TasgateWebhookCallsFailing",
        "TasgateWebhookDenyingMost",
        "TasgateWebhookLatencyNearTimeout",
        "TasgateGangStraggler",
    }
    assert main <= tested, f"alerts without a promtool test: {sorted(main - tested)}"
    # every recording rule's value is a promtool case of its own (read by name in an expression)
    exprs = " ".join(
        case["expr"]
        for t in yaml.safe_load(ALERT_TESTS.read_text())["tests"]
        for case in t.get("promql_expr_test", [])
    )
    records = {r["record"] for g in rule_spec()["groups"] for r in g["rules"] if "record" in r}
    assert len(records) >= 5
    assert not {r for r in records if r not in promql.metric_names(exprs)}, "recording rules untested"


def test_dashboard_queries_are_promql_promtool_accepts(promtool: str, tmp_path: Path) -> None:
    """Each panel query and variable, its Grafana variables filled in, as a recording rule."""
    records = [
        {"record": f"dashboard:query_{i}", "expr": promql.with_grafana_variables(expr)}
        for i, (_, expr) in enumerate(dashboard_queries())
    ]
    (tmp_path / "dashboard.yaml").write_text(yaml.safe_dump({"groups": [{"name": "d", "rules": records}]}))
    assert (
        f"SUCCESS: {len(records)} rules found"
        in run([promtool, "check", "rules", "dashboard.yaml"], tmp_path).stdout
    )


async def exported_names(api: Client, side: Client) -> set[str]:
    """Sample names /metrics serves after the app has decided, denied, dry-run and refused."""
    await through_both(api, manifest("job-rack.yaml"))
    await through_both(api, manifest("jobset-never-fits.yaml"))
    await through_both(api, manifest("job-rack.yaml"), dryRun=True)
    assert (await api.post("/mutate", data=b"not json")).status == 400
    declared, _ = scraped_names(await (await side.get("/metrics")).text())
    return declared


async def test_every_queried_metric_is_exported(
    served: Harness, api: Client, aiohttp_client: ClientFactory
) -> None:
    side = await aiohttp_client(create_metrics_app(served.app))
    exported = await exported_names(api, side)
    used = queried_metrics()
    assert len(used) >= 20, f"the queries name too few metrics to be read right: {sorted(used)}"
    assert {"tasgate_admission_decisions_total", "tasgate_decision_duration_seconds_bucket"} <= exported
    # Other components' series only by name from the allow-list (each with its source); a tasgate_
    # name must be on tasgate's /metrics whatever the list says.
    allowed = set(external_metrics.by_sample_name())
    assert not {n for n in allowed if n.startswith("tasgate_")}
    missing = missing_report(used, exported | allowed)
    assert not missing, f"queried but neither exported by tasgate's /metrics nor allow-listed:\n{missing}"
    others = {n for n in used if n not in exported}
    assert {"up", "apiserver_admission_webhook_rejection_count", "kueue_pending_workloads"} <= others


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        (
            'sum by (reason) (rate(tasgate_a_total{cluster_queue=~"$cq"}[$__rate_interval]))',
            {"tasgate_a_total"},
        ),
        ("histogram_quantile(0.99, sum by (le, endpoint) (rate(x_bucket[5m]))) > 1", {"x_bucket"}),
        ('max by (namespace, name) (g{state="never_fits"}) >= 0', {"g"}),
        ("(a - time()) < 14 * 86400 and a > time()", {"a"}),
        ("a * on (name, namespace) group_left(cluster_queue) b offset 5m", {"a", "b"}),
        ('label_replace(a, "dst", "not_a_metric", "src", "(.*)") or vector(0)', {"a"}),
        (
            '{__name__="by_name", job="x"} unless absent(c) or sum without (pod) (d) / bool e',
            {"by_name", "c", "d", "e"},
        ),
        ("topk(20, max(x) by (le)) + 1e3 + 0x1F + Inf", {"x"}),
    ],
)
def test_promql_tokenizer_finds_metric_names_only(expr: str, names: set[str]) -> None:
    assert promql.metric_names(expr) == names


def test_grafana_variable_queries() -> None:
    assert promql.grafana_query('label_values(m{topology=~"$t"}, flavor)') == 'm{topology=~"$t"}'
    assert promql.grafana_query("label_values(flavor)") is None
    assert promql.grafana_query("query_result(max(m))") == "max(m)"
    assert promql.with_grafana_variables('rate(m{a=~"$a"}[$__rate_interval])') == 'rate(m{a=~".*"}[5m])'


def test_promtool_installer_fails_loudly_when_it_cannot_install(tmp_path: Path) -> None:
    """No promtool and no apt-get: exit 1 and say so (the suite must fail, not skip)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("id", "bash"):
        (bin_dir / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    script = str(ROOT / "hack" / "ensure-promtool.sh")
    done = subprocess.run(
        [str(bin_dir / "bash"), script], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 1 and "missing and apt-get is not available" in done.stderr
    env["PROMTOOL"] = str(tmp_path / "nowhere")
    done = subprocess.run(
        [str(bin_dir / "bash"), script], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 1 and "is not an executable" in done.stderr


GRAFANA_MACROS = {"__rate_interval", "__range", "__interval"}


def test_dashboard_panels_are_laid_out_and_use_only_defined_variables() -> None:
    board = dashboard()
    panels = board["panels"]
    assert len({p["id"] for p in panels}) == len(panels), "panel ids are unique"
    defined = {v["name"] for v in board["templating"]["list"]}
    cells: set[tuple[int, int]] = set()
    for p in panels:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not mine & cells, f"panel {p['title']!r} overlaps another"
        cells |= mine
        if p["type"] == "row":
            continue
        assert p["targets"] and p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        for target in p["targets"]:
            used = set(re.findall(r"\$\{?(\w+)", target["expr"])) - GRAFANA_MACROS
            assert used <= defined, f"panel {p['title']!r} uses undefined variables {sorted(used - defined)}"
