"""Is the API server answering? A watch is only as current as the server behind it.

A paused, wedged or partitioned API server leaves every watch connection open and silent: no
error, no event, no end, for as long as the client's read timeout (minutes). Counted as
connected, such a watch would look current forever. So every few seconds tasgate asks the API
server one small question — a one-item list of Namespaces, a consistent read through the API
server to etcd, the same path its watches are fed by — and tells the `Mirror` when the
question was sent if an answer came (``Mirror.alive``). An open watch is then current only up
to the last answer; when the server stops answering, the state ages and `/readyz` and the
reviews see it after ``--stale-after``. A 429 is an answer too: the server is up and shedding
load, and priority and fairness never holds an established watch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.live.api import call_json

log = logging.getLogger("tasgate.live")
PROBE = "/api/v1/namespaces?limit=1"
INTERVAL = 5.0  # seconds between probes, unless --stale-after asks for more often


def interval_for(stale_after: float) -> float:
    """Probe several times within ``stale_after``: a state is as old as the last answer, so a
    probe every ``stale_after`` seconds would let a healthy, quiet cluster read just past the
    limit before each answer (5 s probes against ``--stale-after 5``)."""
    return INTERVAL if stale_after <= 0 else min(INTERVAL, stale_after / 4)


class Alive(Protocol):
    def alive(self, at: float) -> None: ...


async def beat_forever(
    api: client.ApiClient, sink: Alive, interval: float = INTERVAL, timeout: float = 10.0
) -> None:
    """Probe every ``interval`` seconds; a failure is logged once per outage, and its end too."""
    failing = False
    while True:
        sent = time.monotonic()
        try:
            await call_json(api, "GET", PROBE, timeout=timeout)
            answered = True
        except ApiException as exc:
            answered = exc.status == 429
            why = f"{exc.status} {str(exc.reason)[:200]}"
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            answered, why = False, f"{type(exc).__name__}: {exc}"
        if answered:
            sink.alive(sent)
            if failing:
                log.info("the API server answers again")
            failing = False
        elif not failing:
            failing = True
            log.warning("the API server does not answer (%s): the state ages from its last answer", why)
        await asyncio.sleep(max(0.0, interval - (time.monotonic() - sent)))
