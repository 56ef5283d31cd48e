"""`GET /topology` on the metrics port: the topology picture of the state in force.

On the side port, not the webhook's: it shows the cluster's layout and workload names, and that
port's NetworkPolicy admits only the scraper's namespaces (the webhook port is open to every
source). HTML by default, ``?format=text`` for the text tree; both stamped with the state
generation and the time they were rendered, and the HTML reloads itself every
``REFRESH_SECONDS``. Rendered in the decision pool, at most once per state generation, policy
and change of the waiting list (a reload in between gets the cached page, its stamp unchanged).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from aiohttp import web

from webhook.decide.policy import Policy
from webhook.figures.fragmentation import cluster_figures
from webhook.present.html import render_html
from webhook.present.running import with_running
from webhook.present.stamp import Stamp
from webhook.present.text import render_text
from webhook.serve.gang_metrics import running_rows
from webhook.serve.keys import EXECUTOR, POLICY, STATE, WAITING, main_app
from webhook.serve.lifecycle_metrics import LIFECYCLE
from webhook.track.classify import State

FORMATS = ("html", "text")
REFRESH_SECONDS = 30  # the live page reloads itself; a reload of an unchanged state is the cached page


class TopologyPage:
    """The handler, with the one page it rendered last (the key says what it was rendered from)."""

    def __init__(self) -> None:
        self._last: tuple[tuple[int, Policy, int, str], str] | None = None  # policy held, not its id

    async def handle(self, request: web.Request) -> web.Response:
        app = main_app(request.app)
        fmt = request.query.get("format", "html")
        if fmt not in FORMATS:
            return web.Response(status=400, text=f"format must be one of {', '.join(FORMATS)}")
        state, policy, waiting = app[STATE].current, app[POLICY].current, app[WAITING]
        if state is None:
            return web.Response(status=503, text="cluster state not loaded yet")
        waiting.drop_started(_started(app))
        gangs = waiting.current()
        key = (state.generation, policy, waiting.version, fmt)
        if self._last is None or not _same(self._last[0], key):

            def render() -> str:
                figures = cluster_figures(state, policy, per_domain=True)
                stamp = Stamp(state.generation, now_text(), REFRESH_SECONDS)
                if fmt == "text":
                    return render_text(figures, gangs, stamp)
                return render_html(figures, gangs, "tasgate topology", stamp)

            body = await asyncio.get_running_loop().run_in_executor(app[EXECUTOR], render)
            self._last = (key, body)
        content_type = "text/html" if fmt == "html" else "text/plain"
        lifecycle = app.get(LIFECYCLE)
        running = running_rows(lifecycle.placed() if lifecycle is not None else (), state)
        page = with_running(self._last[1], running, fmt == "html")  # changes between generations
        return web.Response(text=page, content_type=content_type, charset="utf-8")


def now_text() -> str:
    """When the page was rendered: UTC, to the second (the figures are those of its generation)."""
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


WAITING_STATES = frozenset(
    {State.WAITING_TOPOLOGY, State.WAITING_QUOTA, State.WAITING_PROVISIONING, State.NEVER_FITS}
)


def _started(app: web.Application) -> set[tuple[str, str]]:
    """Workloads (namespace, name) the lifecycle tracker sees admitted or further along."""
    lifecycle = app.get(LIFECYCLE)
    rows = lifecycle.rows() if lifecycle is not None else ()
    return {(row.namespace, row.name) for row in rows if row.state not in WAITING_STATES}


def _same(a: tuple[int, Policy, int, str], b: tuple[int, Policy, int, str]) -> bool:
    """The same state generation, policy object, waiting-list version and format."""
    return a[0] == b[0] and a[1] is b[1] and a[2:] == b[2:]
