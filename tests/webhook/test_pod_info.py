"""``tasgate_pod_info``: one join series per running pod of a tracked gang, opt-in.

The captured gangs (tests/webhook/manifests/lifecycle: ``run``, 2 pods running on n0 and n1 of
rack b0-r0 with a TAS flavor; ``partial``, 2 of 4 pods running on c0 and c1 with a flavor without
a Topology) through the real Tracker, as test_placement_quality drives it.
"""

from __future__ import annotations

import argparse
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from webhook.live.tracked import GANG_PODS, WORKLOADS
from webhook.live.tracker import Tracker
from webhook.serve.flags import add_arguments
from webhook.serve.lifecycle_metrics import LifecycleMetrics
from webhook.track.pod_info import level_labels

from .conftest import HOST
from .test_placement_quality import _holder, _objects
from .test_serve_flags import started
from .test_tracker import BLOCK, LIFECYCLE, RACK, _capture_time, _docs, _policy


def _served(enabled: bool, pods: list[dict[str, Any]] | None = None) -> tuple[Tracker, CollectorRegistry]:
    registry = CollectorRegistry()
    metrics = LifecycleMetrics(registry, pod_info=enabled)
    clock = _capture_time() + 60
    holder = _holder()
    tracker = Tracker(holder, _policy, None, clock=lambda: clock)
    workloads, captured = _objects()
    tracker.replace(WORKLOADS, workloads)
    tracker.replace(GANG_PODS, captured if pods is None else pods)
    metrics.follow(tracker.rows, tracker.counts, tracker.placed, lambda: (tracker.current, holder.current))
    return tracker, registry


def _samples(registry: CollectorRegistry) -> list[dict[str, str]]:
    text = generate_latest(registry).decode()
    (family,) = [f for f in text_string_to_metric_families(text) if f.name == "tasgate_pod_info"]
    assert family.type == "gauge"
    assert all(s.value == 1.0 for s in family.samples)
    return sorted((dict(s.labels) for s in family.samples), key=lambda labels: labels["pod"])


def test_level_label_names_are_the_levels_last_word_or_the_whole_key_when_ambiguous() -> None:
    assert level_labels((BLOCK, RACK, HOST)) == {BLOCK: "block", RACK: "rack", HOST: "hostname"}
    assert level_labels(("cloud.provider.com/topology-block", "topology.kubernetes.io/zone")) == {
        "cloud.provider.com/topology-block": "block",
        "topology.kubernetes.io/zone": "zone",
    }
    # two levels ending in the same word, a word the join itself uses, one that is not a name
    assert level_labels(("a.example/rack", "b.example/rack", "x.example/pod", "y.example/2")) == {
        "a.example/rack": "level_a_example_rack",
        "b.example/rack": "level_b_example_rack",
        "x.example/pod": "level_x_example_pod",
        "y.example/2": "level_y_example_2",
    }


async def test_one_series_per_running_pod_with_its_gang_and_domains() -> None:
    tracker, registry = _served(True)
    await tracker.step()
    run = {"namespace": "gangs", "gang": "run", "block": "b0", "rack": "b0-r0"}
    assert _samples(registry) == [
        {"namespace": "gangs", "pod": "partial-0-rv5f6", "gang": "partial"},  # no Topology: no levels
        {"namespace": "gangs", "pod": "partial-1-7npbw", "gang": "partial"},
        {**run, "pod": "run-0-b72s8", "hostname": "n0"},
        {**run, "pod": "run-1-5fks6", "hostname": "n1"},
    ]


async def test_a_pod_that_ends_and_a_gang_no_longer_tracked_lose_their_series() -> None:
    tracker, registry = _served(True)
    await tracker.step()
    ended = next(p for p in _docs(LIFECYCLE / "pods.yaml") if p["metadata"]["name"] == "run-1-5fks6")
    ended["status"]["phase"] = "Succeeded"
    tracker.apply(GANG_PODS, "MODIFIED", ended)
    await tracker.step()
    assert [s["pod"] for s in _samples(registry) if s["gang"] == "run"] == ["run-0-b72s8"]
    partial = next(
        w for w in _docs(LIFECYCLE / "workloads.yaml") if w["metadata"]["name"].startswith("job-partial")
    )
    tracker.apply(WORKLOADS, "DELETED", partial)
    await tracker.step()
    assert {s["gang"] for s in _samples(registry)} == {"run"}


async def test_off_by_default_the_family_is_declared_without_series() -> None:
    tracker, registry = _served(False)
    await tracker.step()
    assert _samples(registry) == []
    assert "# TYPE tasgate_pod_info gauge" in generate_latest(registry).decode()


def test_the_flag_and_its_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    def parse(*argv: str) -> argparse.Namespace:
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        return parser.parse_args(argv)

    monkeypatch.delenv("TASGATE_POD_INFO_METRICS", raising=False)
    assert parse().pod_info_metrics is False
    assert parse("--pod-info-metrics").pod_info_metrics is True
    monkeypatch.setenv("TASGATE_POD_INFO_METRICS", "true")
    assert parse().pod_info_metrics is True
    assert parse("--no-pod-info-metrics").pod_info_metrics is False
    assert started(monkeypatch, parse("--pod-info-metrics"))["settings"].pod_info_metrics is True
    monkeypatch.delenv("TASGATE_POD_INFO_METRICS")
    assert started(monkeypatch, parse())["settings"].pod_info_metrics is False
