"""Test-only routes on the metrics port, present only with ``--test-fault-hook``: the fault suite
makes a background task fail (``/debug/raise/<task>``), and the end-to-end row for a quota
charge during a rebuild holds the Mirror's next rebuild (``/debug/rebuild``, `live.rebuild_hold`).
Never in production: without the flag these paths are 404."""

from __future__ import annotations

from aiohttp import web

from webhook.live.rebuild_hold import RebuildHold
from webhook.serve.handlers import json_response
from webhook.serve.keys import REBUILD_HOLD, SUPERVISOR, main_app


def add_routes(side: web.Application) -> None:
    side.router.add_post("/debug/raise/{task}", inject_fault)
    side.router.add_get("/debug/rebuild", rebuild_report)
    side.router.add_post("/debug/rebuild/hold", hold_rebuild)
    side.router.add_post("/debug/rebuild/release", release_rebuild)


async def inject_fault(request: web.Request) -> web.Response:
    """Make the background task named in the path fail."""
    name = request.match_info["task"]
    if main_app(request.app)[SUPERVISOR].inject(name):
        return web.Response(text=f"fault injected into {name}\n")
    return web.Response(status=404, text=f"no running task {name}\n")


def _hold(request: web.Request) -> RebuildHold:
    found = main_app(request.app).get(REBUILD_HOLD)
    if found is None:
        raise web.HTTPNotFound(text="no live Mirror to hold (live mode only)\n")
    return found


async def rebuild_report(request: web.Request) -> web.Response:
    return json_response(_hold(request).report())


async def hold_rebuild(request: web.Request) -> web.Response:
    _hold(request).arm()
    return json_response(_hold(request).report())


async def release_rebuild(request: web.Request) -> web.Response:
    _hold(request).release()
    return json_response(_hold(request).report())
