"""The topology picture as one self-contained HTML page: inline SVG and CSS, no script, no CDN.

Per TAS flavor, the domains as boxes within boxes (a fill colour per level), each with its free /
total accelerators, a bar of free (green), used (orange) and unavailable (grey) ones, and the
shapes' fits; large levels collapsed to the domains that matter (``collapse``), rows wrapped to
the page (``layout``). The box closest to holding a waiting gang now is outlined in purple and
tagged with its number; where it goes once capacity frees is not drawn (it is not known: the
table says how many domains could take it and Kueue's empty-cluster tie-break). Tables below
repeat the figures as text. Every name comes from the cluster, so every name is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from webhook.figures.fragmentation import FlavorFigures
from webhook.figures.waiting import WaitingGang
from webhook.present.collapse import collapse
from webhook.present.gangs import (
    closest,
    flavor_of,
    keep_paths,
    needs_text,
    numbered,
    once_text,
    phrase,
    waiting_for,
)
from webhook.present.layout import BAR, LINE, PAD, Box, Layout, layout
from webhook.present.stamp import Stamp

LEVEL_FILLS = ("#dbe8f5", "#e4f1d9", "#fdf0d5", "#efe3f6", "#e0f3f1", "#f6e1e1")
MORE_FILL = "#f3f3f3"
FREE, USED, UNAVAILABLE, EMPTY = "#2e9e5b", "#e0862b", "#8c8c8c", "#ffffff"
CLOSEST = "#7b2cbf"
STYLE = """
body { margin: 0; font: 13px sans-serif; color: #1b1b1b; background: #ffffff; overflow-wrap: anywhere; }
header, section { padding: 6px 12px; }
h1 { font-size: 18px; margin: 4px 0; } h2 { font-size: 15px; margin: 10px 0 4px; }
p { margin: 4px 0; } .stamp { color: #505050; }
svg { display: block; max-width: 100%; height: auto; margin: 0 4px; }
svg text { font: 12px sans-serif; fill: #1b1b1b; }
svg text.tag { fill: #7b2cbf; font-weight: bold; }
svg text.more { font-style: italic; }
table { border-collapse: collapse; margin: 6px 0 14px; max-width: 100%; }
th, td { border: 1px solid #b8b8b8; padding: 2px 8px; text-align: left; vertical-align: top; }
th, td:first-child { overflow-wrap: normal; white-space: nowrap; }
.swatch { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 10px; }
"""


def render_html(
    figures: Sequence[FlavorFigures], waiting: Sequence[WaitingGang], title: str, stamp: Stamp
) -> str:
    refresh = f'<meta http-equiv="refresh" content="{stamp.refresh}">' if stamp.refresh else ""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta name="viewport" content="width=device-width">{refresh}',
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>",
        f'<header><h1>{escape(title)}</h1><p class="stamp">{escape(stamp.text)}</p></header>',
    ]
    numbers = numbered(waiting)
    for flavor in figures:
        parts.append(_flavor(flavor, waiting_for(waiting, flavor), numbers))
    parts.append("<section>")
    parts.append(_legend())
    if not figures:
        parts.append("<p>No TAS flavor with a Topology in this cluster state.</p>")
    for flavor in figures:
        parts.append(_shape_table(flavor))
    parts.append(_waiting_table(waiting, numbers, figures))
    parts.append("</section></body></html>")
    return "\n".join(parts) + "\n"


def _flavor(
    figures: FlavorFigures, waiting: Sequence[WaitingGang], numbers: dict[tuple[str, str, str], int]
) -> str:
    shown = collapse(figures, keep_paths(waiting, figures))
    drawn = layout(shown)
    head = (
        f"topology {figures.topology} · flavor {figures.flavor} · free/total "
        f"{figures.accelerator or 'accelerators (none here)'}"
    )
    notes = [*figures.notes, *([shown.note] if shown.note else [])]
    return "\n".join(
        [
            f'<section class="flavor"><h2>{escape(head)}</h2>',
            *(f'<p class="note">{escape(note)}</p>' for note in notes),
            _svg(figures, drawn, waiting, numbers),
            "</section>",
        ]
    )


def _svg(
    figures: FlavorFigures,
    drawn: Layout,
    waiting: Sequence[WaitingGang],
    numbers: dict[tuple[str, str, str], int],
) -> str:
    tags: dict[tuple[str, ...], list[int]] = {}
    for gang in waiting:
        for ps in gang.pod_sets:
            near = closest(ps, len(figures.levels))
            marks = tags.setdefault(near, []) if near else []
            if near and numbers[gang.key] not in marks:
                marks.append(numbers[gang.key])
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{drawn.width}" height="{drawn.height}" '
        f'viewBox="0 0 {drawn.width} {drawn.height}" data-topology="{escape(figures.topology)}" '
        f'data-flavor="{escape(figures.flavor)}">',
    ]
    out += [_box(box, tags.get(box.figure.path, []), figures) for box in drawn.boxes]
    out.append("</svg>")
    return "\n".join(out)


def _box(box: Box, tags: list[int], figures: FlavorFigures) -> str:
    d = box.figure
    fill = MORE_FILL if box.more else LEVEL_FILLS[box.depth % len(LEVEL_FILLS)]
    stroke = 'stroke="#505050" stroke-width="1"'
    if tags:
        stroke = f'stroke="{CLOSEST}" stroke-width="3"'
    elif box.more:
        stroke = 'stroke="#8c8c8c" stroke-width="1" stroke-dasharray="4 3"'
    what = f"{box.lines[0]} ({d.level})" if box.more else f"{d.domain_id} ({d.level})"
    why = f" ({', '.join(d.marks)})" if d.marks else f", {d.tainted} tainted" if d.tainted else ""
    tooltip = (
        f"{what}: {d.free} free, {d.used} used, {d.unavailable} unavailable "
        f"of {d.total} {figures.accelerator}{why}"
    )
    kind = "more" if box.more else "domain"
    out = [
        f'<g class="{kind}" data-level="{escape(d.level)}" data-domain="{escape(d.domain_id)}" '
        f'data-free="{d.free}" data-total="{d.total}" data-used="{d.used}" '
        f'data-unavailable="{d.unavailable}" data-tainted="{d.tainted}">',
        f"<title>{escape(tooltip)}</title>",
        f'<rect class="box" x="{box.x}" y="{box.y}" width="{box.width}" height="{box.height}" '
        f'fill="{fill}" {stroke}/>',
    ]
    style = ' class="more"' if box.more else ""
    for i, line in enumerate(box.lines):
        out.append(f'<text{style} x="{box.x + PAD}" y="{box.y + LINE * (i + 1)}">{escape(line)}</text>')
    if tags:
        label = " ".join(f"W{n}" for n in tags)
        x = box.x + box.width - PAD
        out.append(f'<text class="tag" x="{x}" y="{box.y + LINE}" text-anchor="end">{label}</text>')
    out.append(_bar(box))
    out.append("</g>")
    return "\n".join(out)


def _bar(box: Box) -> str:
    """Free, used, unavailable, left to right, in proportion to the domain's accelerators."""
    d, width = box.figure, box.width - 2 * PAD
    x, y = box.x + PAD, box.bar_y
    if d.total <= 0:
        return f'<rect class="bar-empty" x="{x}" y="{y}" width="{width}" height="{BAR}" fill="{EMPTY}"/>'
    free_w = round(width * d.free / d.total)
    used_w = round(width * (d.free + d.used) / d.total) - free_w
    rest = width - free_w - used_w
    out = []
    for name, colour, w in (
        ("free", FREE, free_w),
        ("used", USED, used_w),
        ("unavailable", UNAVAILABLE, rest),
    ):
        if w > 0:
            out.append(
                f'<rect class="bar-{name}" x="{x}" y="{y}" width="{w}" height="{BAR}" fill="{colour}"/>'
            )
        x += w
    return "".join(out)


def _legend() -> str:
    items = (("free", FREE), ("used", USED), ("unavailable (not ready, cordoned)", UNAVAILABLE))
    spans = "".join(f'<span class="swatch" style="background:{c}"></span>{escape(n)}' for n, c in items)
    marked = (
        f'<span class="swatch" style="background:{CLOSEST}"></span>outline: the domain closest to '
        "holding waiting gang W<i>n</i> now"
        f'<span class="swatch" style="background:{MORE_FILL};border:1px dashed #8c8c8c"></span>'
        "dashed: domains left out, summed"
    )
    return f"<p>accelerators:{spans}{marked}</p>"


def _shape_table(figures: FlavorFigures) -> str:
    rows = "".join(
        f"<tr><td>{escape(s.level)}</td><td>{s.shape.text}</td><td>{s.best_gangs}</td><td>{s.best_pods}</td>"
        f"<td>{escape(','.join(s.best_domain or ()))}</td><td>{s.domains}</td></tr>"
        for s in figures.shapes
    )
    return (
        f"<h3>{escape(figures.flavor)}: gang shapes that fit now</h3><table>"
        "<tr><th>level</th><th>shape (pods x GPUs)</th><th>gangs in the best domain</th>"
        "<th>pods in it</th><th>best domain</th><th>domains holding one</th></tr>"
        f"{rows}</table>"
    )


def _waiting_table(
    waiting: Sequence[WaitingGang], numbers: dict[tuple[str, str, str], int], figures: Sequence[FlavorFigures]
) -> str:
    if not waiting:
        return "<h3>Waiting gangs</h3><p>None.</p>"
    rows = []
    for gang in waiting:
        flavor = flavor_of(gang, figures)
        for ps in gang.pod_sets:
            f = ps.figure
            cells = (
                f"W{numbers[gang.key]}",
                f"{escape(gang.kind)} {escape(gang.namespace)}/{escape(gang.name)}",
                escape(ps.name),
                escape(needs_text(ps)),
                escape(phrase(ps)),
                escape(",".join(f.closest) if f.closest else "(counted over the topology)"),
                escape(once_text(ps, flavor)),
                escape(gang.flavor),
            )
            rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = (
        "#",
        "workload",
        "PodSet",
        "needs",
        "now (as check says)",
        "closest now",
        "once capacity frees",
        "flavor",
    )
    return (
        "<h3>Waiting gangs</h3><table><tr>"
        + "".join(f"<th>{h}</th>" for h in head)
        + "</tr>"
        + "".join(rows)
        + "</table>"
    )
