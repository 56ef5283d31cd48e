"""The docs that have a source in the code are generated from it (``hack/gen-docs.py``), and a
committed text that differs from what it writes fails here, as the README's performance table
is kept equal to ``bench/summary.json``: the cluster dump commands from the kinds ``check --live``
lists, the Helm values table from ``values.schema.json`` and ``values.yaml``, the Datadog tables
from what the Agent's check sent (``fixtures/datadog-check.json``, kept equal to a live run of that
check by ``test_datadog_check.py``)."""

from __future__ import annotations

import importlib.util
import json
from types import ModuleType

import pytest

from tests.webhook.conftest import REPO
from webhook.cli import sources
from webhook.cli.dump import command, dump_commands, guess_resource
from webhook.live.kinds import kinds

GEN = REPO / "hack" / "gen-docs.py"


def gen_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", GEN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", ["README.md", "docs/cli.md", "docs/install.md", "docs/monitoring.md"])
def test_committed_text_is_what_the_generator_writes(path: str) -> None:
    assert (REPO / path).read_text() == gen_docs().expected(path), (
        f"run .venv/bin/python {GEN.relative_to(REPO)}"
    )


def test_the_dump_has_every_kind_the_offline_state_reads() -> None:
    resources = {r.split(".")[0] for c in dump_commands() for r in c.resources}
    assert {"limitranges", "priorityclasses", "trainingruntimes", "clustertrainingruntimes"} <= resources
    listed = {guess_resource(k.kind) for k in kinds() if k.name not in ("podgroups", "volcanopodgroups")}
    assert listed <= resources, "every kind check --live lists is dumped (the PodGroup CRDs: only live)"
    assert "workloads.kueue.x-k8s.io" in command("kueue") and "workloads.scheduling.k8s.io" in command(
        "native"
    )


def test_the_messages_that_ask_for_a_dump_ask_for_the_same_commands() -> None:
    assert (command("core"), command("kueue")) == (sources.NODE_DUMP, sources.KUEUE_DUMP)
    assert "limitranges" in sources.NODE_DUMP


def test_every_chart_value_has_a_row() -> None:
    schema = json.loads((REPO / "charts" / "tasgate" / "values.schema.json").read_text())
    generator = gen_docs()
    keys = [key for key, _ in generator.leaves(schema)]
    table = generator.values_table(schema, (REPO / "charts" / "tasgate" / "values.yaml").read_text())
    rows = [line.split(" | ")[0].strip("| `") for line in table.splitlines()[2:]]
    assert rows == keys and "decisionProcesses" in rows
    assert all(line.split(" | ")[-1].strip(" |") for line in table.splitlines()[2:]), (
        "every value says what it does"
    )


def test_the_docs_say_what_a_newcomer_missed() -> None:
    install = (REPO / "docs" / "install.md").read_text()
    assert "`searchNamespace` reaches `tasgate-system`" in install
    for page in ("docs/install.md", "docs/cli.md"):
        assert "schedulerName" in (REPO / page).read_text(), page


def test_the_datadog_tables_have_a_row_per_metric_and_service_check_the_check_sent() -> None:
    """Rows read back from the generated text: the names, types and tags of the fixture, nothing
    dropped or reordered into another metric's row."""
    sent = json.loads((REPO / "tests" / "webhook" / "fixtures" / "datadog-check.json").read_text())
    metrics, checks = gen_docs().datadog_tables(sent).split("\n\n")
    rows = [line.strip("| ").split(" | ") for line in metrics.splitlines()[2:]]
    assert len(rows) == len(sent["metrics"]) and all(len(row) == 3 for row in rows)
    assert {name.strip("`"): (kind, tags) for name, kind, tags in rows} == {
        name: (spec["type"], ", ".join(f"`{t}`" for t in spec["tags"]))
        for name, spec in sent["metrics"].items()
    }
    assert "| `tasgate.readyz` | OK | CRITICAL | `service` |" in checks
    assert len(checks.splitlines()) == 2 + len(sent["service_checks"])
