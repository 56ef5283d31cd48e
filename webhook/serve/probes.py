"""/healthz and /readyz, on the webhook port and the metrics port.

Ready means this replica can answer reviews: state loaded and fresh, the compiled scorer, its
background tasks not failing over and over, its certificate loaded, not draining. What a ready
replica must still say goes after "ok": leadership is one such note — a replica that cannot take
the writers' Lease answers reviews all the same (answering needs no Lease), so the API server
must keep sending them, but no PodGroups or Events are written by it, and perhaps by nobody.
The Kueue release is another: verdicts for a Kueue tasgate is not proven against still come.
"""

from __future__ import annotations

from aiohttp import web

import scorer
from webhook.decide.kueue.release import release_warning
from webhook.serve.keys import RELOADER, RUNTIME, SETTINGS, STATE, SUPERVISOR, main_app
from webhook.serve.live_tasks import STANDING


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def readyz(request: web.Request) -> web.Response:
    app = main_app(request.app)
    problems = readiness_problems(app)
    if problems:
        return web.Response(status=503, text="not ready: " + "; ".join(problems))
    return web.Response(text="; ".join(["ok", *readiness_notes(app)]))


def readiness_notes(app: web.Application) -> list[str]:
    """Said on a 200: why this replica does not lead, when it cannot take the Lease; and the
    Kueue the cluster runs when tasgate is not proven against it (every verdict says so too)."""
    standing = app.get(STANDING)
    detail = standing.detail() if standing is not None else None
    state = app[STATE].current
    kueue = release_warning(state.kueue_release) if state is not None else None
    return [note for note in (detail, kueue) if note]


def readiness_problems(app: web.Application) -> list[str]:
    settings, holder = app[SETTINGS], app[STATE]
    problems = []
    if app[RUNTIME].draining:
        problems.append("draining")
    if holder.current is None:
        problems.append("cluster state not loaded")
    age = holder.age()
    if settings.stale_after and age is not None and age > settings.stale_after:
        problems.append(f"cluster state is {age:.0f}s old (limit {settings.stale_after:.0f}s)")
    if scorer.IMPLEMENTATION != "compiled" and not settings.allow_reference_scorer:
        problems.append(
            "compiled scorer not active (pure-Python twin in use; --allow-reference-scorer to accept)"
        )
    supervisor = app.get(SUPERVISOR)
    if supervisor is not None:
        problems.extend(supervisor.problems())
    reloader = app.get(RELOADER)
    if reloader is not None and not reloader.loaded:
        problems.append("serving certificate not loaded")
    return problems
