"""Headless Chromium for the picture tests: a screenshot and the DOM of a page, and colour helpers.

Chromium is Debian's (``tests/tools/ensure-chromium.sh``, which `make test` and `make e2e` run
first); when it is missing the calling test fails, never skips.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.webhook.pngread import Image, read_png

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--force-device-scale-factor=1")


def chromium() -> str:
    found = shutil.which(os.environ.get("TASGATE_CHROMIUM", "chromium"))
    if found is None:
        pytest.fail("headless Chromium is missing: run tests/tools/ensure-chromium.sh (make test does)")
    return found


def browser(*args: str) -> str:
    done = subprocess.run(
        [chromium(), *FLAGS, *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


# Run in a copy of the page only (the page itself has no script): writes where the browser put
# each SVG and how wide and tall the document is into the DOM, for --dump-dom to show.
PROBE = """<script>
for (const s of document.querySelectorAll("svg")) {
  const r = s.getBoundingClientRect();
  s.setAttribute("data-left", Math.round(r.left + scrollX));
  s.setAttribute("data-top", Math.round(r.top + scrollY));
  s.setAttribute("data-drawn-width", Math.round(r.width));
}
const e = document.documentElement;
document.body.setAttribute("data-scroll-width", e.scrollWidth);
document.body.setAttribute("data-client-width", e.clientWidth);
document.body.setAttribute("data-scroll-height", e.scrollHeight);
</script>"""


@dataclass(frozen=True)
class Drawn:
    """A page as Chromium drew it: the screenshot of the whole page, the DOM it built (the probe's
    attributes included), and where the first SVG's top-left corner is in the screenshot."""

    image: Image
    dom: str
    scroll_width: int
    client_width: int
    svg_left: int
    svg_top: int


def draw(page: str, workdir: Path, width: int) -> Drawn:
    """The page in a window ``width`` wide, screenshot as tall as the page."""
    html, probed = workdir / "topology.html", workdir / "probed.html"
    html.write_text(page)
    probed.write_text(page.replace("</body>", PROBE + "</body>"))
    dom = browser(f"--window-size={width},800", "--dump-dom", probed.as_uri())
    body = re.search(
        r'<body[^>]*data-scroll-width="(\d+)" data-client-width="(\d+)" data-scroll-height="(\d+)"', dom
    )
    svg = re.search(r'<svg [^>]*data-left="(\d+)" data-top="(\d+)"', dom)
    assert body and svg, "the probe did not run"
    scroll_width, client_width, height = (int(v) for v in body.groups())
    shot = workdir / "topology.png"
    browser(f"--window-size={width},{height}", f"--screenshot={shot}", html.as_uri())
    left, top = (int(v) for v in svg.groups())
    return Drawn(read_png(shot.read_bytes()), dom, scroll_width, client_width, left, top)


def render(page: str, workdir: Path) -> tuple[Image, str]:
    """The page as Chromium draws it, and the DOM it built, the first SVG moved to the screenshot's
    top-left corner (so its boxes' coordinates are the screenshot's pixels)."""
    size = re.search(r'<svg [^>]*width="(\d+)" height="(\d+)"', page)
    assert size, "no SVG in the page"
    drawn = draw(page, workdir, int(size.group(1)) + 40)
    image = drawn.image
    rows = tuple(row[3 * drawn.svg_left :] for row in image.rows[drawn.svg_top :])
    return Image(image.width - drawn.svg_left, image.height - drawn.svg_top, rows), drawn.dom


def rgb(colour: str) -> tuple[int, int, int]:
    value = int(colour.lstrip("#"), 16)
    return value >> 16, (value >> 8) & 0xFF, value & 0xFF


def domain_group(dom: str, domain: str) -> str:
    """The SVG group of one domain's box, by Kueue's DomainID."""
    found = re.search(rf'<g class="domain"[^>]*data-domain="{re.escape(domain)}".*?</g>', dom, re.S)
    assert found, f"no box for {domain} in the DOM"
    return found.group(0)


def box_rect(group: str) -> tuple[int, int, int, int]:
    found = re.search(r'<rect class="box" x="(\d+)" y="(\d+)" width="(\d+)" height="(\d+)"', group)
    assert found, "a domain group without its box"
    x, y, w, h = (int(v) for v in found.groups())
    return x, y, w, h
