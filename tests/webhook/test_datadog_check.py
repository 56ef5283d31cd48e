"""The Datadog Autodiscovery annotation, run by the Datadog Agent's own check code.

The Agent runs an ``openmetrics`` instance that has ``openmetrics_endpoint`` as a plain
``OpenMetricsBaseCheckV2`` (datadog-checks-base); its submissions go to the Agent's aggregator,
here the package's ``AggregatorStub``. Each instance is the shipped annotation's, rendered as the
Agent renders it (``%%host%%`` the pod's address, the metrics port the one tasgate listens on), and
scrapes a live `tasgate serve` in which every listed metric has series (``datadog_world.py``). So
the names, types, suffixes, tags and service checks below are what Datadog receives, not what the
docs hope;
``fixtures/datadog-check.json`` keeps them, and docs/monitoring.md's table is generated from it
(``hack/gen-docs.py``). ``TASGATE_CAPTURE_DATADOG=1`` rewrites it from this run.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from datadog_checks.base import OpenMetricsBaseCheckV2
from datadog_checks.base.stubs import aggregator as aggregator_stub
from prometheus_client.parser import text_string_to_metric_families

from tests.webhook.datadog_world import Served, World, live_world
from tests.webhook.test_datadog import KEY, NOT_FOR_DATADOG, ROOT, pod_template, renamed, service_checks

FIXTURE = ROOT / "tests" / "webhook" / "fixtures" / "datadog-check.json"
STATUS = {OpenMetricsBaseCheckV2.OK: "OK", OpenMetricsBaseCheckV2.WARNING: "WARNING",
          OpenMetricsBaseCheckV2.CRITICAL: "CRITICAL", OpenMetricsBaseCheckV2.UNKNOWN: "UNKNOWN"}  # fmt: skip
HEALTH, READYZ = "tasgate.openmetrics.health", "tasgate.readyz"
# The Agent's package leaves these unannotated: Any, so that strict typing takes their calls.
Check: Any = OpenMetricsBaseCheckV2
aggregator: Any = aggregator_stub


@dataclass
class Run:
    """What one check run submitted: per Datadog metric its stubs, per service check its stubs."""

    error: str
    metrics: dict[str, list[Any]]
    service_checks: dict[str, list[Any]]
    limit: int  # the most series a run sends (max_returned_metrics)

    def produced(self) -> dict[str, dict[str, Any]]:
        """Per metric name: its one Datadog type and the tag names its series carry."""
        out = {}
        for name, stubs in sorted(self.metrics.items()):
            (kind,) = {aggregator.METRIC_ENUM_MAP_REV[s.type] for s in stubs}
            out[name] = {"type": kind, "tags": sorted({t.split(":")[0] for s in stubs for t in s.tags})}
        return out

    def status(self, name: str) -> str:
        (status,) = {STATUS[s.status] for s in self.service_checks[name]}
        return status


def rendered(metrics_port: int) -> dict[str, dict[str, Any]]:
    """The annotation's instances, keyed by endpoint path, as the Agent renders them for a pod at
    127.0.0.1 whose metrics port (the container's, in the annotation) is ``metrics_port``."""
    template = pod_template()
    text = template["metadata"]["annotations"][KEY]
    (container,) = template["spec"]["containers"]
    port = next(p["containerPort"] for p in container["ports"] if p["name"] == "metrics")
    assert set(re.findall(r"%%\w+%%", text)) == {"%%host%%"}, "a template variable left unrendered"
    text = text.replace("%%host%%", "127.0.0.1").replace(f":{port}/", f":{metrics_port}/")
    checks = json.loads(text)
    assert set(checks) == {"openmetrics"} and checks["openmetrics"]["init_config"] == {}
    return {i["openmetrics_endpoint"].rsplit("/", 1)[1]: i for i in checks["openmetrics"]["instances"]}


def run(instance: dict[str, Any], times: int = 1) -> list[Run]:
    """Run the check on ``instance`` as the Agent does (one check object, run every interval).

    The stub refuses a ``service:`` tag (generic tag names are forbidden in an integration's own
    metrics); a user's instance ``tags`` are where unified service tagging puts it, and the Agent
    sends it, so that stub-only rule is turned off."""
    check = Check("openmetrics", {}, [instance])
    runs = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DDEV_SKIP_GENERIC_TAGS_CHECK", "1")
        for _ in range(times):
            aggregator.reset()
            error = check.run()
            metrics = {name: aggregator.metrics(name) for name in aggregator.metric_names}
            checks = {name: aggregator.service_checks(name) for name in aggregator.service_check_names}
            runs.append(Run(error, metrics, checks, check.metric_limiter.limit))
    return runs


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    yield from live_world(tmp_path_factory.mktemp("datadog"))


@pytest.fixture(scope="module")
def scraped(live: World) -> tuple[Run, Run]:
    """Two runs of the metrics instance (the first is the counters' baseline)."""
    instances = rendered(live.served.metrics_port)
    assert set(instances) == {"metrics"}
    first, second = run(instances["metrics"], times=2)
    assert (first.error, second.error) == ("", ""), first.error
    return first, second


@pytest.fixture(scope="module")
def not_ready(live: World) -> Run:
    """The instance on the tasgate whose cluster state never loads."""
    assert live.unready.status("/readyz") == 503
    (unready,) = run(rendered(live.unready.metrics_port)["metrics"])
    return unready


def expected_names(served: Served) -> dict[str, str]:
    """The Datadog name and type OpenMetricsBaseCheckV2 gives each listed metric's samples, from
    the type tasgate declares for it: a counter's ``.count``, a histogram's ``.bucket``, ``.sum``
    and ``.count`` (monotonic counts: the Agent sends the increase per interval), a gauge as is."""
    declared = {f.name: f.type for f in text_string_to_metric_families(served.metrics())}
    # prometheus_client writes each counter's and histogram's start as a <name>_created gauge:
    # not in the list, so the check drops them.
    families = {name for name in declared if not name.endswith("_created")}
    assert families - NOT_FOR_DATADOG == set(renamed()) | set(service_checks()), (
        "the annotation lists what is served"
    )
    suffixes = {"counter": (".count",), "histogram": (".bucket", ".sum", ".count"), "gauge": ("",)}
    out = {}
    for name, short in renamed().items():
        kind = declared[name]
        for suffix in suffixes[kind]:
            out[f"tasgate.{short}{suffix}"] = "gauge" if kind == "gauge" else "monotonic_count"
    return out


def test_every_listed_metric_arrives_with_its_datadog_name_and_type(
    live: World, scraped: tuple[Run, Run]
) -> None:
    produced = scraped[1].produced()
    assert {name: spec["type"] for name, spec in produced.items()} == expected_names(live.served)
    assert produced["tasgate.gang_domains_spanned.bucket"]["tags"] == [
        "mode", "service", "topology_level", "upper_bound"
    ]  # fmt: skip
    assert "le" not in {t for spec in produced.values() for t in spec["tags"]}


def test_labels_are_tags_with_the_topology_ones_renamed_and_no_endpoint_url(
    scraped: tuple[Run, Run],
) -> None:
    """``level`` and ``domain`` say nothing alone in a Datadog tag list; the check's own
    ``endpoint:<scrape URL>`` tag would sit beside tasgate's ``endpoint:validate`` and mix the two
    in every ``by {endpoint}`` (the annotation sets ``tag_by_endpoint: false``)."""
    series = [stub for stubs in scraped[1].metrics.values() for stub in stubs]
    tags = {tag for stub in series for tag in stub.tags}
    assert all("service:tasgate" in stub.tags for stub in series)
    assert not {t for t in tags if t.split(":")[0] in ("level", "domain")}
    free = scraped[1].metrics["tasgate.domain_free_accelerators"]
    assert {"topology_level:topology.example.com/rack", "topology_domain:b0,b0-r1"} <= {
        t for stub in free for t in stub.tags
    }
    endpoints = {t for t in tags if t.startswith("endpoint:")}
    assert endpoints == {"endpoint:mutate", "endpoint:validate"}, endpoints


def test_counters_are_sent_from_the_second_scrape_on(scraped: tuple[Run, Run]) -> None:
    """The first scrape is each monotonic count's baseline (tasgate exports no
    process_start_time_seconds for the check to flush it by), gauges are sent at once."""
    first, second = scraped
    for runs, flushed in ((first, False), (second, True)):
        for stubs in runs.metrics.values():
            for stub in stubs:
                if stub.type == aggregator.MONOTONIC_COUNT:
                    assert stub.flush_first_value is flushed, stub
    assert first.metrics["tasgate.leader"][0].value == 1.0
    sent = sum(len(stubs) for stubs in second.metrics.values())
    assert second.limit == 2000 and sent < second.limit  # the docs' max_returned_metrics


def test_readyz_is_a_service_check_ok_when_ready_and_critical_when_not(
    scraped: tuple[Run, Run], not_ready: Run
) -> None:
    """tasgate_ready is the service check tasgate.readyz (the check's ``service_check`` type), and
    no metric; the instance's own health check only says /metrics answered, which a replica that
    cannot decide still does, so the run on the unready replica succeeds."""
    ready = scraped[1]
    assert (ready.status(HEALTH), ready.status(READYZ)) == ("OK", "OK")
    assert (not_ready.status(HEALTH), not_ready.status(READYZ)) == ("OK", "CRITICAL")
    assert not_ready.error == ""
    (critical,) = not_ready.service_checks[READYZ]
    assert "service:tasgate" in critical.tags
    assert not [name for name in ready.metrics if name.startswith(READYZ) or name == "tasgate.ready"]


def observed(scraped: tuple[Run, Run], not_ready: Run) -> dict[str, Any]:
    """What the fixture keeps: every metric's Datadog type and tag names, every service check's
    status on a ready and on a not-ready tasgate, and its tag names."""
    ready, checks = scraped[1], {}
    for name in sorted(ready.service_checks):
        tags = sorted({t.split(":")[0] for s in ready.service_checks[name] for t in s.tags})
        checks[name] = {"ready": ready.status(name), "not ready": not_ready.status(name), "tags": tags}
    return {"metrics": ready.produced(), "service_checks": checks}


def test_the_committed_fixture_is_what_the_check_produced(scraped: tuple[Run, Run], not_ready: Run) -> None:
    now = observed(scraped, not_ready)
    if os.environ.get("TASGATE_CAPTURE_DATADOG") == "1":
        FIXTURE.write_text(json.dumps(now, indent=2, sort_keys=True) + "\n")
    assert json.loads(FIXTURE.read_text()) == now, (
        "TASGATE_CAPTURE_DATADOG=1 .venv/bin/python -m pytest tests/webhook/test_datadog_check.py, "
        "then .venv/bin/python hack/gen-docs.py"
    )


def test_what_the_docs_datadog_section_names_is_what_the_check_sends(
    scraped: tuple[Run, Run],
) -> None:
    """Every Datadog metric, service check and example tag the section's prose names is one the
    run produced; the docs cannot promise a name or a tag the Agent never sends."""
    text = (ROOT / "docs" / "monitoring.md").read_text()
    section = text[text.index("## Datadog\n") :]
    section = section[: section.index("\n## ", 1)]
    section = re.sub(r"<!-- datadog:start -->.*<!-- datadog:end -->", "", section, flags=re.S)  # generated
    produced = set(scraped[1].metrics) | set(scraped[1].service_checks)
    named = set(re.findall(r"(?<![/\w])tasgate\.[a-z_]+(?:\.[a-z_]+)*(?![/\w])", section))
    assert named and named <= produced, sorted(named - produced)
    tags = {t for stubs in scraped[1].metrics.values() for stub in stubs for t in stub.tags}
    examples = set(re.findall(r"`((?:topology_level|topology_domain|upper_bound|service):[^`<]+)`", section))
    assert examples and examples <= tags, sorted(examples - tags)


def test_the_fixture_lists_the_metrics_the_annotation_names_and_nothing_for_pod_info() -> None:
    """Without a server: the fixture the docs are generated from covers the annotation's list."""
    fixture = json.loads(FIXTURE.read_text())
    shorts = {name.split(".")[1] for name in fixture["metrics"]}
    assert shorts == set(renamed().values()) and "pod_info" not in shorts
    assert set(fixture["service_checks"]) == {HEALTH, READYZ}
