"""The gauges computed on scrape (webhook/serve/probe_metrics.py): seconds left on a certificate
whose notAfter is known, read on a clock the test moves, and readiness as /readyz decides it."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from cryptography import x509
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from webhook.files.policy import load_policy
from webhook.files.sample import sample_objects
from webhook.serve import certs
from webhook.serve.app import create_app, create_metrics_app
from webhook.serve.keys import Settings, StateSource
from webhook.serve.probe_metrics import READY, REMAINING, ProbeMetrics
from webhook.serve.tls import CertReloader, server_context

DAY = 86400.0
ClientFactory = Callable[[web.Application], Awaitable[TestClient[web.Request, web.Application]]]


def _same(value: float | None) -> float | None:
    return value


def samples(registry: CollectorRegistry) -> dict[str, list[float]]:
    """Every family's sample values, as a scrape of /metrics reads them."""
    text = generate_latest(registry).decode()
    return {f.name: [s.value for s in f.samples] for f in text_string_to_metric_families(text)}


def test_seconds_left_follow_the_clock_and_go_negative_once_expired(tmp_path: Path) -> None:
    files = certs.generate(tmp_path, ["localhost"], days=30)
    reloader = CertReloader(server_context(files.cert, files.key), files.cert, files.key)
    not_after = x509.load_pem_x509_certificate(files.cert.read_bytes()).not_valid_after_utc.timestamp()
    assert reloader.not_after == not_after
    now = [not_after - 14 * DAY - 1]
    registry = CollectorRegistry()
    ProbeMetrics(registry, lambda: reloader.not_after, lambda: True, clock=lambda: now[0])
    assert samples(registry)[REMAINING] == [14 * DAY + 1]  # not yet "expires soon" (< 14 days)
    now[0] = not_after - 3600
    assert samples(registry)[REMAINING] == [3600.0]  # computed on each scrape, nothing stored
    now[0] = not_after + 5
    assert samples(registry)[REMAINING] == [-5.0]  # expired: at or below 0


def test_no_sample_before_a_certificate_is_loaded() -> None:
    """So neither certificate monitor can fire on a replica that never had one (the rules' > 0)."""
    unloaded: list[float | None] = [None, 0.0]
    for expiry in unloaded:
        registry = CollectorRegistry()
        ProbeMetrics(registry, functools.partial(_same, expiry), lambda: False, clock=lambda: 1e9)
        assert samples(registry)[REMAINING] == [] and samples(registry)[READY] == [0.0]


def test_ready_is_read_at_each_scrape_and_not_at_registration() -> None:
    asked = []
    ready = [False]

    def answer() -> bool:
        asked.append(ready[0])
        return ready[0]

    registry = CollectorRegistry()
    ProbeMetrics(registry, lambda: None, answer)
    assert asked == []
    assert samples(registry)[READY] == [0.0]
    ready[0] = True
    assert samples(registry)[READY] == [1.0] and asked == [False, True]


@pytest.mark.parametrize(("objects", "status", "ready"), [(None, 503, 0.0), (sample_objects(), 200, 1.0)])
async def test_the_served_gauge_is_what_readyz_answers(
    aiohttp_client: ClientFactory, objects: list[dict[str, object]] | None, status: int, ready: float
) -> None:
    """On the app `tasgate serve` runs: state never loaded (503), and loaded (200)."""
    source = StateSource(objects=objects, label="sample")
    app = create_app(Settings(policy=load_policy("default")), lambda _: None, source)
    side = await aiohttp_client(create_metrics_app(app))
    await aiohttp_client(app)
    assert (await side.get("/readyz")).status == status
    text = await (await side.get("/metrics")).text()
    families = {f.name: [x.value for x in f.samples] for f in text_string_to_metric_families(text)}
    assert families[READY] == [ready] and families[REMAINING] == []  # no certificate served here
