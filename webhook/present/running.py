"""Running gangs and the domains their pods occupy, appended to the /topology page.

The picture above it shows free capacity; this says where the gangs that hold the rest landed,
and whether that met what they asked for (``track.quality``). Plain rows in (the serve layer
builds them from the tracker), text or an HTML table out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape


@dataclass(frozen=True)
class RunningGang:
    namespace: str
    name: str
    cluster_queue: str
    mode: str  # required / preferred / unconstrained
    result: str  # met / spread / violated, "" for unconstrained
    domains: str  # "rack=r0,r1 block=b0"


def running_text(rows: Sequence[RunningGang]) -> str:
    if not rows:
        return ""
    lines = ["running gangs (domains their pods occupy):"]
    for r in rows:
        verdict = f"{r.mode} {r.result}".strip()
        lines.append(f"  {r.namespace}/{r.name} [{r.cluster_queue}] {verdict}: {r.domains}")
    return "\n".join(lines) + "\n"


def running_html(rows: Sequence[RunningGang]) -> str:
    if not rows:
        return ""
    cells = "".join(
        f"<tr><td>{escape(r.namespace)}/{escape(r.name)}</td><td>{escape(r.cluster_queue)}</td>"
        f"<td>{escape(r.mode)}</td><td>{escape(r.result)}</td><td>{escape(r.domains)}</td></tr>"
        for r in rows
    )
    head = "<tr><th>gang</th><th>ClusterQueue</th><th>mode</th><th>result</th><th>domains</th></tr>"
    return f'<section class="running"><h3>Running gangs</h3><table>{head}{cells}</table></section>'


def with_running(page: str, rows: Sequence[RunningGang], html: bool) -> str:
    """The page with the running gangs after its last section (the text: at its end)."""
    if not html:
        return page + running_text(rows)
    table = running_html(rows)
    end = page.rfind("</body>")
    return page if not table or end < 0 else page[:end] + table + page[end:]
