"""Where each domain's box goes: nested boxes, level by level, sized bottom-up.

Pure geometry over ``FlavorFigures``: a box holds a header (name, free/total, a bar, shape
fits) and its children in a grid. The HTML renderer draws these rectangles; a test measures the
screenshot against the same state, so sizes are whole pixels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from webhook.decide.fragmentation import DomainFigure, FlavorFigures

PAD = 8  # inside a box, around its children
GAP = 8  # between sibling boxes
LINE = 15  # one header text line
BAR = 8  # the free/used/unavailable bar
CHAR = 7  # width of one character of header text (12 px sans-serif, rounded up)
MIN_WIDTH = 92
MAX_LABEL = 28  # longer names are cut in the box (the full name is its tooltip)
MAX_BOXES = 2000  # beyond this the host level is left out of the picture
TITLE = 28  # the flavor title above the outer boxes
MAX_ROW = 2400  # widest row of sibling boxes, in pixels


@dataclass(frozen=True, slots=True)
class Box:
    figure: DomainFigure
    depth: int
    x: int
    y: int
    width: int
    height: int
    lines: tuple[str, ...]

    @property
    def bar_y(self) -> int:
        return self.y + 4 + LINE * len(self.lines)


@dataclass(frozen=True, slots=True)
class Layout:
    width: int
    height: int
    boxes: tuple[Box, ...]
    drawn_levels: tuple[str, ...]
    note: str = ""


def layout(figures: FlavorFigures) -> Layout:
    levels = figures.levels
    note = ""
    if len(figures.domains) > MAX_BOXES and figures.hostname_leaves and len(levels) > 1:
        levels, note = levels[:-1], f"hosts left out: more than {MAX_BOXES} domains to draw"
    drawn = [d for d in figures.domains if d.level in levels]
    children: dict[tuple[str, ...], list[DomainFigure]] = {}
    for d in drawn:
        if len(d.path) > 1:
            children.setdefault(d.path[:-1], []).append(d)
    grid = _Grid(children, {})
    for d in sorted(drawn, key=lambda d: -len(d.path)):  # children before their parents
        grid.sizes[d.path] = grid.size_of(d)
    boxes: list[Box] = []
    y, width = TITLE, 0
    for root in (d for d in drawn if len(d.path) == 1):
        w, h = grid.sizes[root.path]
        grid.place(root, 0, PAD, y, (w, h), boxes)
        y += h + GAP
        width = max(width, w + 2 * PAD)
    return Layout(max(width, 480), y + PAD, tuple(boxes), levels, note)


def header_lines(d: DomainFigure) -> tuple[str, ...]:
    """The text of a box: its own level value, free/total accelerators, then the shapes' fits."""
    name = d.path[-1] if len(d.path[-1]) <= MAX_LABEL else d.path[-1][: MAX_LABEL - 1] + "…"
    lines = [name, f"free {d.free}/{d.total}"]
    per_pod = {s.shape.gpus_per_pod: s.pods for s in d.shapes}
    lines += [f"{gpus}-GPU pods: {pods}" for gpus, pods in per_pod.items()]
    if d.shapes:
        lines.append(" · ".join(f"{s.shape.text}: {s.gangs}" for s in d.shapes))
    return tuple(lines)


def _header_height(lines: tuple[str, ...]) -> int:
    return 4 + LINE * len(lines) + BAR + PAD


@dataclass
class _Grid:
    """Children of each domain in a grid of equal cells (the largest child's size)."""

    children: dict[tuple[str, ...], list[DomainFigure]]
    sizes: dict[tuple[str, ...], tuple[int, int]]

    def columns(self, kids: list[DomainFigure]) -> int:
        """Hosts (childless boxes) in a near-square grid, other domains up to four abreast, and
        no row wider than ``MAX_ROW`` pixels when its boxes allow."""
        wanted = (
            min(len(kids), 4)
            if any(k.path in self.children for k in kids)
            else math.ceil(math.sqrt(len(kids)))
        )
        fitting = MAX_ROW // (self.cell(kids)[0] + GAP)
        return max(1, min(wanted, fitting))

    def cell(self, kids: list[DomainFigure]) -> tuple[int, int]:
        return max(self.sizes[k.path][0] for k in kids), max(self.sizes[k.path][1] for k in kids)

    def size_of(self, d: DomainFigure) -> tuple[int, int]:
        lines = header_lines(d)
        head_w = max(MIN_WIDTH, CHAR * max(len(t) for t in lines) + 2 * PAD)
        kids = self.children.get(d.path, [])
        if not kids:
            return head_w, _header_height(lines)
        cols, (cell_w, cell_h) = self.columns(kids), self.cell(kids)
        rows = math.ceil(len(kids) / cols)
        grid_w = cols * cell_w + (cols - 1) * GAP
        grid_h = rows * cell_h + (rows - 1) * GAP
        return max(head_w, grid_w + 2 * PAD), _header_height(lines) + grid_h + PAD

    def place(
        self, d: DomainFigure, depth: int, x: int, y: int, size: tuple[int, int], boxes: list[Box]
    ) -> None:
        lines = header_lines(d)
        boxes.append(Box(d, depth, x, y, size[0], size[1], lines))
        kids = self.children.get(d.path, [])
        if not kids:
            return
        cols, (cell_w, cell_h) = self.columns(kids), self.cell(kids)
        top = y + _header_height(lines)
        for i, kid in enumerate(kids):
            row, col = divmod(i, cols)
            kx, ky = x + PAD + col * (cell_w + GAP), top + row * (cell_h + GAP)
            self.place(kid, depth + 1, kx, ky, (cell_w, cell_h), boxes)
