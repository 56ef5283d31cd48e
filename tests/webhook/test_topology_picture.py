"""The topology picture as a browser draws it: `tasgate map -o html` rendered by headless Chromium.

The screenshot is read back (``pngread``) and held to the sample cluster's own constants
(``webhook/files/sample.py``), not to the renderer's numbers: one filled region per domain of each
level, the free part of a block's bar as wide as its share of free GPUs, the box closest to
holding the waiting gang now outlined (and not its empty-cluster tie-break). The large clusters
(1,024 and 10,000 nodes) are in ``test_topology_scale``. Chromium's ``--dump-dom`` shows the
figures written in the right boxes.
Chromium comes from Debian (``tests/tools/ensure-chromium.sh``, which `make test` runs first); a
missing browser fails this test, it never skips.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.webhook.chromium import box_rect, domain_group, render, rgb
from tests.webhook.conftest import MANIFESTS, tasgate
from tests.webhook.pngread import Image
from webhook.files import sample
from webhook.present.html import CLOSEST, FREE, LEVEL_FILLS
from webhook.present.layout import PAD

MIN_AREA = 300  # a box's fill, minus its text, is far larger; a glyph's hole is far smaller


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Image, str]:
    run = tasgate("map", "-o", "html", "-f", str(MANIFESTS / "pytorchjob-waits.yaml"))
    assert run.code == 0, run.err
    out: Path = tmp_path_factory.mktemp("picture")
    return render(run.out, out)


def sample_free_gpus(block: int) -> int:
    away = {sample.CORDONED, sample.NOT_READY}
    free = 0
    for r in range(1, sample.RACKS + 1):
        hosts = [f"b{block}-r{r}-h{h}" for h in range(1, sample.HOSTS + 1)]
        free += sum(sample.GPUS - sample.BUSY.get((block, r), 0) for h in hosts if h not in away)
    return free


def test_one_filled_box_per_domain_of_each_level(rendered: tuple[Image, str]) -> None:
    image, _ = rendered
    per_level = (sample.BLOCKS, sample.BLOCKS * sample.RACKS, sample.BLOCKS * sample.RACKS * sample.HOSTS)
    for depth, expected in enumerate(per_level):
        regions = image.regions(rgb(LEVEL_FILLS[depth]), MIN_AREA)
        assert len(regions) == expected, (
            f"level {depth}: {len(regions)} boxes drawn, the state has {expected}"
        )


def test_the_free_part_of_each_blocks_bar_is_its_share_of_free_gpus(rendered: tuple[Image, str]) -> None:
    image, dom = rendered
    for block in range(1, sample.BLOCKS + 1):
        x, _, w, _ = box_rect(domain_group(dom, f"b{block}"))
        bar = re.search(r'class="bar-free" x="\d+" y="(\d+)"', domain_group(dom, f"b{block}"))
        assert bar
        row = int(bar.group(1)) + 4
        left, width = x + PAD, w - 2 * PAD
        green = sum(image.pixel(px, row) == rgb(FREE) for px in range(left, left + width))
        total = sample.GPUS * sample.RACKS * sample.HOSTS
        assert abs(green - width * sample_free_gpus(block) / total) <= 2, (block, green, width)


def test_the_figures_are_written_in_the_right_boxes(rendered: tuple[Image, str]) -> None:
    _, dom = rendered
    b2 = domain_group(dom, "b2")
    assert f">free {sample_free_gpus(2)}/{sample.GPUS * sample.RACKS * sample.HOSTS}<" in b2
    assert ">8-GPU pods: 10<" in b2 and ">8x8: 1 · 32x8: 0<" in b2
    assert ">free 24/32<" in domain_group(dom, "b2,b2-r1"), "hosts with 6 free GPUs each"
    assert ">8-GPU pods: 0<" in domain_group(dom, "b2,b2-r1")
    assert ">W1<" in domain_group(dom, "b2") and "W1" not in domain_group(dom, "b1")
    assert "PyTorchJob default/llama-finetune" in dom


def test_the_closest_box_now_is_outlined_and_the_tie_break_is_not(rendered: tuple[Image, str]) -> None:
    """b2 comes closest now (10 of 15); b1 is only Kueue's pick on an empty cluster: not drawn."""
    image, dom = rendered
    for block, outlined in ((2, True), (1, False)):
        x, y, _, h = box_rect(domain_group(dom, f"b{block}"))
        edge = [image.pixel(x, py) == rgb(CLOSEST) for py in range(y + 4, y + h - 4)]
        assert all(edge) if outlined else not any(edge), block
