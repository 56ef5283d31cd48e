"""Where each domain's box goes: nested boxes, level by level, sized bottom-up, wrapped to a width.

Pure geometry over the shown tree (``collapse``): a box holds a header (name, free/total, a bar,
shape fits) and its children left to right, wrapped, so no row is wider than ``PAGE_WIDTH``
at any depth (the page never scrolls sideways; a narrower window
scales the picture down). A parent's left-out children are one "… and K more" box. The HTML
renderer draws these rectangles; a test measures the screenshot against the same state, so
sizes are whole pixels.
"""

from __future__ import annotations

from dataclasses import dataclass

from webhook.figures.fragmentation import DomainFigure
from webhook.present.collapse import Hidden, Shown

PAD = 8  # inside a box, around its children
GAP = 8  # between sibling boxes
LINE = 15  # one header text line
BAR = 8  # the free/used/unavailable bar
CHAR = 7  # width of one character of header text (12 px sans-serif, rounded up)
MIN_WIDTH = 92
MAX_LABEL = 28  # longer names are cut in the box (the full name is its tooltip)
PAGE_WIDTH = 1200  # the picture's width: every row of boxes wraps within it
MIN_PAGE = 480

Path = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Box:
    """One drawn rectangle: a domain, or (``more`` > 0) the sum of a parent's left-out children."""

    figure: DomainFigure
    depth: int
    x: int
    y: int
    width: int
    height: int
    lines: tuple[str, ...]
    more: int = 0

    @property
    def bar_y(self) -> int:
        return self.y + 4 + LINE * len(self.lines)


@dataclass(frozen=True, slots=True)
class Layout:
    width: int
    height: int
    boxes: tuple[Box, ...]


def layout(shown: Shown) -> Layout:
    grid = _Flow(shown, {})
    items = grid.items(())
    for depth in range(_depth(shown), -1, -1):  # children before their parents
        for path, d in grid.at_depth(depth):
            grid.sizes[path] = grid.size_of(path, d, depth)
    boxes: list[Box] = []
    if not items:
        return Layout(MIN_PAGE, PAD, ())
    width, height = grid.place_children((), -1, 0, 0, boxes)
    return Layout(max(width + 2 * PAD, MIN_PAGE), height + PAD, tuple(boxes))


def header_lines(d: DomainFigure) -> tuple[str, ...]:
    """The text of a box: its own level value, free/total accelerators, then the shapes' fits."""
    lines = [_cut(d.path[-1]), f"free {d.free}/{d.total}"]
    if d.marks or d.tainted:  # why some of it holds no pod: the host's reason, or the tainted share
        lines.append(_cut(", ".join(d.marks) if d.marks else f"{d.tainted} tainted"))
    per_pod = {s.shape.gpus_per_pod: s.pods for s in d.shapes}
    lines += [f"{gpus}-GPU pods: {pods}" for gpus, pods in per_pod.items()]
    if d.shapes:
        lines.append(" · ".join(f"{s.shape.text}: {s.gangs}" for s in d.shapes))
    return tuple(lines)


def more_lines(h: Hidden) -> tuple[str, ...]:
    return (_cut(h.label), f"free {h.figure}")


def more_figure(parent: Path, h: Hidden) -> DomainFigure:
    """A left-out sum as a figure the renderer draws like a domain (its path ends in "…")."""
    return DomainFigure(h.level, (*parent, "…"), h.total, h.free, h.used, h.unavailable, tainted=h.tainted)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"


def _header_height(lines: tuple[str, ...]) -> int:
    return 4 + LINE * len(lines) + BAR + PAD


def _depth(shown: Shown) -> int:
    return max((len(path) for path in shown.children), default=0)


def _room(depth: int) -> int:
    """The widest a box at ``depth`` (0: the top level) may be."""
    return PAGE_WIDTH - 2 * PAD * (depth + 1)


@dataclass
class _Flow:
    """Children of each box left to right, wrapped to the box's room, each row as tall as its
    tallest box (the other domains stretched to it): a wide box never widens its siblings."""

    shown: Shown
    sizes: dict[Path, tuple[int, int]]

    def items(self, path: Path) -> list[tuple[Path, DomainFigure, int]]:
        """The boxes inside ``path``: its shown children, then its left-out ones as one box."""
        if path[-1:] == ("…",):
            return []
        out = [(d.path, d, 0) for d in self.shown.kids(path)]
        hidden = self.shown.hidden.get(path)
        if hidden is not None:
            more = more_figure(path, hidden)
            out.append((more.path, more, hidden.count))
        return out

    def at_depth(self, depth: int) -> list[tuple[Path, DomainFigure]]:
        """Every box ``depth`` levels down (0: the top level), by walking the shown tree."""
        level: list[Path] = [()]
        for _ in range(depth):
            level = [p for parent in level for p, _, more in self.items(parent) if not more]
        return [(p, d) for parent in level for p, d, _ in self.items(parent)]

    def lines(self, path: Path, d: DomainFigure) -> tuple[str, ...]:
        hidden = self.shown.hidden.get(path[:-1]) if path[-1:] == ("…",) else None
        return more_lines(hidden) if hidden is not None else header_lines(d)

    def size_of(self, path: Path, d: DomainFigure, depth: int) -> tuple[int, int]:
        lines = self.lines(path, d)
        head_w = min(max(MIN_WIDTH, CHAR * max(len(t) for t in lines) + 2 * PAD), _room(depth))
        kids = self.items(path)
        if not kids:
            return head_w, _header_height(lines)
        rows = self.rows(kids, depth + 1)
        return max(head_w, _rows_width(rows) + 2 * PAD), _header_height(lines) + _rows_height(rows) + PAD

    def rows(self, kids: list[tuple[Path, DomainFigure, int]], depth: int) -> list[list[_Cell]]:
        """Children at ``depth`` in rows no wider than the room inside their parent."""
        room = _room(depth - 1) - 2 * PAD
        rows: list[list[_Cell]] = [[]]
        used = 0
        for path, d, more in kids:
            w, h = self.sizes[path]
            if rows[-1] and used + GAP + w > room:
                rows.append([])
                used = 0
            used += (GAP if rows[-1] else 0) + w
            rows[-1].append(_Cell(path, d, more, w, h))
        return rows

    def place_children(self, path: Path, depth: int, x: int, top: int, boxes: list[Box]) -> tuple[int, int]:
        """Place the boxes inside ``path`` from (x, top); their rows' width and height."""
        rows = self.rows(self.items(path), depth + 1)
        y = top + PAD
        for row in rows:
            height = max(c.height for c in row)
            kx = x + PAD
            for c in row:
                self.place(c, depth + 1, kx, y, height, boxes)
                kx += c.width + GAP
            y += height + GAP
        return _rows_width(rows), _rows_height(rows) + PAD

    def place(self, c: _Cell, depth: int, x: int, y: int, height: int, boxes: list[Box]) -> None:
        lines = self.lines(c.path, c.figure)
        tall = c.height if c.more else height  # a sum of left-out boxes keeps its own height
        boxes.append(Box(c.figure, depth, x, y, c.width, tall, lines, c.more))
        if not c.more and self.items(c.path):
            self.place_children(c.path, depth, x, y + _header_height(lines) - PAD, boxes)


@dataclass(frozen=True, slots=True)
class _Cell:
    path: Path
    figure: DomainFigure
    more: int
    width: int
    height: int


def _rows_width(rows: list[list[_Cell]]) -> int:
    return max(sum(c.width for c in row) + GAP * (len(row) - 1) for row in rows)


def _rows_height(rows: list[list[_Cell]]) -> int:
    return sum(max(c.height for c in row) for row in rows) + GAP * (len(rows) - 1)
