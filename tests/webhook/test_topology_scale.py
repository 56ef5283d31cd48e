"""The topology picture of a large cluster, as a person gets it: 1,024 and 10,000 nodes drawn by
headless Chromium in a 1,280-pixel window (``tests.webhook.chromium.draw``).

Held to what the issue found broken: the page must not scroll sideways (the document is no wider
than the window, and the screenshot's right margin is background), name its state generation
and the time it was rendered, list domains in natural order (r2 before r10), and collapse a
level too large to read to the domains that matter, the rest summed. The screenshots are kept
in ``~/.cache/tasgate/map-1k.png`` and ``map-10k.png`` for a person to look at.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.webhook.chromium import Drawn, draw, rgb
from tests.webhook.topology_world import block_job, world_state
from webhook.decide.decision import decide
from webhook.decide.verdicts import Review
from webhook.figures.fragmentation import cluster_figures
from webhook.figures.waiting import waiting_gang
from webhook.files.policy import load_policy
from webhook.present.collapse import EXTREMES, SHOW_ALL
from webhook.present.html import CLOSEST, render_html
from webhook.present.stamp import Stamp
from webhook.present.text import render_text

WINDOW = 1280
CACHE = Path.home() / ".cache" / "tasgate"
SIZES = {1024: ("map-1k.png", 250), 10_000: ("map-10k.png", 800)}  # nodes: screenshot, gang pods
STAMP = Stamp(7, "2026-08-01 12:00:00 UTC")


@pytest.fixture(scope="module", params=sorted(SIZES))
def picture(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[int, str, Drawn]:
    nodes: int = request.param
    name, pods = SIZES[nodes]
    state, policy = world_state(nodes), load_policy("default")
    decision = decide(Review(block_job(pods), namespace="default"), state, policy)
    gang = waiting_gang(decision, policy.gpu_resources)
    assert gang is not None, decision.warnings
    page = render_html(cluster_figures(state, policy, per_domain=True), [gang], "tasgate topology", STAMP)
    drawn = draw(page, tmp_path_factory.mktemp(f"scale{nodes}"), WINDOW)
    CACHE.mkdir(parents=True, exist_ok=True)
    shutil.copy(tmp_path_factory.getbasetemp() / f"scale{nodes}0" / "topology.png", CACHE / name)
    return nodes, page, drawn


def test_the_page_never_scrolls_sideways(picture: tuple[int, str, Drawn]) -> None:
    _, _, drawn = picture
    assert drawn.scroll_width <= drawn.client_width == WINDOW, (drawn.scroll_width, drawn.client_width)
    sizes = re.findall(r'<svg [^>]*width="(\d+)" [^>]*data-drawn-width="(\d+)"', drawn.dom)
    assert sizes and all(a == b for a, b in sizes), f"the picture fits unscaled (12-pixel text): {sizes}"
    image = drawn.image
    margin = {image.pixel(x, y) for x in range(image.width - 4, image.width) for y in range(image.height)}
    assert margin == {(255, 255, 255)}, "the right margin of the screenshot is background"


def test_the_page_says_its_generation_and_time(picture: tuple[int, str, Drawn]) -> None:
    _, page, drawn = picture
    assert ">state generation 7 · rendered 2026-08-01 12:00:00 UTC<" in drawn.dom
    assert 'http-equiv="refresh"' not in page, "an offline page has no reload"


def test_domains_are_in_natural_order(picture: tuple[int, str, Drawn]) -> None:
    """Siblings as a person counts them: r2 before r10, h9 before h10, in every parent."""
    _, _, drawn = picture
    ids = re.findall(r'class="domain" data-level="[^"]*" data-domain="([^"]*)"', drawn.dom)
    siblings: dict[tuple[str, ...], list[int]] = {}
    for domain in ids:
        *parent, name = domain.split(",")
        siblings.setdefault(tuple(parent), []).append(int(re.findall(r"\d+", name)[-1]))
    assert all(n == sorted(n) for n in siblings.values()), siblings
    assert any(len(n) >= 2 and max(n) >= 10 for n in siblings.values()), (
        "some parent shows r10 or h10 beside r2"
    )


def test_large_levels_are_collapsed_to_the_domains_that_matter(picture: tuple[int, str, Drawn]) -> None:
    nodes, _, drawn = picture
    hosts = len(re.findall(r'class="domain" data-level="kubernetes.io/hostname"', drawn.dom))
    assert hosts <= 2 * EXTREMES + 3 < nodes, hosts
    assert re.search(rf"node: {hosts} of {nodes} shown", drawn.dom)
    assert "… and 16 more nodes" in drawn.dom or "… and 50 more nodes" in drawn.dom
    racks = len(re.findall(r'class="domain" data-level="cloud.provider.com/topology-rack"', drawn.dom))
    assert racks == 64 if nodes == 1024 else racks <= 2 * EXTREMES + 3 < SHOW_ALL, racks
    assert drawn.image.regions(rgb(CLOSEST), 40), "the waiting gang's closest block is outlined"


def test_the_text_is_collapsed_the_same_way() -> None:
    state, policy = world_state(10_000), load_policy("default")
    text = render_text(cluster_figures(state, policy, per_domain=False), [])
    assert len(text.splitlines()) < 80
    assert "… and 20 more racks" in text
    shown = re.search(r"\(rack: (\d+) of 200 shown, node: (\d+) of 10000 shown", text)
    assert shown and int(shown.group(1)) <= 2 * EXTREMES + 3 and int(shown.group(2)) <= 2 * EXTREMES + 1
