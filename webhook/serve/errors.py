"""The answer path cannot 500: whatever fails after a review is parsed is still an answer.

aiohttp turns an exception in a handler into a plain ``500 Internal Server Error`` with no
AdmissionReview; the API server then applies the webhook's failurePolicy with a message nobody
can act on. `answer_errors` catches it instead: once the review's uid is known (the handler
stores it on the request as soon as the body parses), the answer is an AdmissionReview for that
uid, allowed or denied per ``--on-timeout`` exactly as when tasgate cannot decide in time, and
the exception is logged once with its traceback. Before the uid is known the request was not a
review at all: a JSON 500 saying so. HTTP errors the handlers raise on purpose pass through. A
client that closed its connection is not a failure of tasgate's: one WARNING line, no traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from webhook.serve.deciding import unavailable
from webhook.serve.handlers import json_response
from webhook.serve.hangups import hung_up
from webhook.serve.keys import METRICS, REVIEW_UID, SETTINGS
from webhook.wire.admission import review_response

log = logging.getLogger("tasgate")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def answer_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except ConnectionError:
        if _gone(request):  # the client closed mid-answer: its doing, one line (hangups.hung_up)
            return hung_up(request, "before it was answered")
        return _failed(request)
    except Exception:
        return _failed(request)


def _gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


def _failed(request: web.Request) -> web.StreamResponse:
    """A failure of tasgate's own (called while handling it): logged once with its traceback,
    answered per --on-timeout once the review's uid is known."""
    app = request.app
    app[METRICS].errors.labels("exception").inc()
    uid = request.get(REVIEW_UID)
    log.exception("answering %s %s failed uid=%s", request.method, request.path, uid)
    if not isinstance(uid, str):
        return web.json_response({"error": "tasgate failed to answer; see its log"}, status=500)
    outcome = unavailable(app[SETTINGS], "tasgate failed while answering; see its log")
    body = review_response(
        uid,
        outcome.allowed,
        code=outcome.code if not outcome.allowed else None,
        message=outcome.message,
        warnings=outcome.warnings,
    )
    return json_response(body)
