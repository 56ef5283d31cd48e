"""Headless Chromium for the picture tests: a screenshot and the DOM of a page, and colour helpers.

Chromium is Debian's (``tests/tools/ensure-chromium.sh``, which `make test` and `make e2e` run
first); when it is missing the calling test fails, never skips.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
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


def render(page: str, workdir: Path) -> tuple[Image, str]:
    """The page as Chromium draws it (the first SVG fully in view) and the DOM it built."""
    html = workdir / "topology.html"
    html.write_text(page)
    size = re.search(r'<svg [^>]*width="(\d+)" height="(\d+)"', page)
    assert size, "no SVG in the page"
    width, height = int(size.group(1)), int(size.group(2))
    shot = workdir / "topology.png"
    browser(f"--window-size={width},{height + 40}", f"--screenshot={shot}", html.as_uri())
    return read_png(shot.read_bytes()), browser("--dump-dom", html.as_uri())


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
