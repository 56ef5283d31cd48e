"""A client that hangs up mid-request: the sender's doing, said in one line.

A review whose connection closes before its body arrives (a ``Content-Length`` of 100 GiB, 10
bytes, then close), or before its answer is written, raises a ``ConnectionResetError`` in the
handler. Logged as a failure it was an ERROR with a traceback per request, at the sender's pace,
and counted as ``errors{kind="exception"}``, which alerts. Here it is one WARNING line and a count
of its own (``kind="disconnected"``), which no alert reads.
"""

from __future__ import annotations

import logging

from aiohttp import web

from webhook.serve.keys import METRICS, main_app

log = logging.getLogger("tasgate")


def hung_up(request: web.Request, when: str) -> web.Response:
    """One line and a count; the answer returned goes nowhere (aiohttp drops a write to a closed
    connection quietly), but a handler must return one."""
    main_app(request.app)[METRICS].errors.labels("disconnected").inc()
    received = getattr(request.content, "total_bytes", 0)
    promised = request.content_length
    body = f"{received} of {promised if promised is not None else 'a chunked'} body bytes"
    log.warning("client hung up %s: %s %s from %s (%s)", when, request.method, request.path,
                request.remote, body)  # fmt: skip
    response = web.json_response({"error": "connection closed by the client"}, status=400)
    response.force_close()
    return response
