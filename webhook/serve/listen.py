"""The listening side of `tasgate serve`: bounded connections, timeouts, quiet bad requests.

Anyone who reaches the webhook port can open connections, so each listener is bounded:

- at most ``max_connections`` established connections; one beyond the cap is closed as soon as
  it is accepted (after its TLS handshake, which itself must finish within the read timeout);
- a connection must deliver a complete request head within the read timeout of connecting or of
  its previous response (aiohttp's keep-alive timer, which partial headers do not reset); the
  body has the same budget (``handlers`` reads it under a timeout and answers 408);
- malformed requests are a client's fault: one WARNING line each, never a traceback
  (``http_logger``); a genuine bug in a handler still logs at ERROR with its traceback.
"""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

log = logging.getLogger("tasgate")
# After an early answer (408, 413) aiohttp reads and drops what the client still sends, so it
# sees the answer rather than a reset; 10 s by default, which a stalled client would hold.
LINGER_SECONDS = 1.0
_CLIENT_FAULTS = (HttpProcessingError, RequestPayloadError, ConnectionError, ssl.SSLError, TimeoutError)


_SENT_BYTES = re.compile(r":?\s*b['\"].*$")  # aiohttp quotes the offending bytes: never into the log
_MOST_SAID = 120


class _OneLine(logging.Filter):
    """Turns aiohttp's "Error handling request" tracebacks for client faults into one short WARNING
    line: who, the status and what was wrong, without the sender's bytes (a flood of 9 KB header
    lines must not copy itself into the log)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None or not isinstance(exc, _CLIENT_FAULTS):
            return True
        said = record.getMessage()
        peer = f" from {said.rpartition(' from ')[2]}" if " from " in said else ""
        record.msg, record.args = f"bad request{peer}: {_what(exc)}", ()
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def _what(exc: BaseException) -> str:
    """The fault in a few words: the HTTP status and the first line of the reason."""
    text = str(getattr(exc, "message", "") or exc).strip()
    first = _SENT_BYTES.sub("", text.splitlines()[0] if text else "").strip(" :.")
    code = getattr(exc, "code", None)
    what = f"{code} {first}" if isinstance(code, int) and first else first or type(exc).__name__
    return what if len(what) <= _MOST_SAID else what[: _MOST_SAID - 1] + "…"


def http_logger() -> logging.Logger:
    """The logger aiohttp's protocol reports to (``AppRunner(logger=...)``)."""
    logger = logging.getLogger("tasgate.http")
    if not any(isinstance(f, _OneLine) for f in logger.filters):
        logger.addFilter(_OneLine())
    return logger


def runner(app: web.Application, read_timeout: float, shutdown_timeout: float) -> web.AppRunner:
    """An AppRunner whose connections idle (or dribble a request head) at most ``read_timeout``."""
    return web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        shutdown_timeout=shutdown_timeout,
        keepalive_timeout=read_timeout,
        lingering_time=LINGER_SECONDS,
        logger=http_logger(),
    )


class _Refuse(asyncio.Protocol):
    """What a connection beyond the cap gets: closed at once."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()


class GuardedSite(web.BaseSite):
    """A TCP site with a connection cap and a TLS handshake timeout."""

    __slots__ = ("_bound", "_handshake_timeout", "_host", "_max_connections", "_port", "refused")

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
        max_connections: int = 1024,
        handshake_timeout: float = 10.0,
        backlog: int = 128,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context, backlog=backlog)
        self._host, self._port = host, port
        self._max_connections = max_connections
        self._handshake_timeout = handshake_timeout
        self._bound: int | None = None
        self.refused = 0

    @property
    def name(self) -> str:
        return f"{'https' if self._ssl_context else 'http'}://{self._host}:{self.port}"

    @property
    def port(self) -> int:
        return self._bound if self._bound is not None else self._port

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        cap = self._max_connections

        def accept() -> Any:
            if len(server.connections) >= cap:
                self.refused += 1
                if self.refused == 1 or self.refused % 1000 == 0:
                    log.warning(
                        "connection cap %d reached on %s: refusing (%d so far)", cap, self.name, self.refused
                    )
                return _Refuse()
            return server()

        extra: dict[str, Any] = {}
        if self._ssl_context is not None:
            extra["ssl_handshake_timeout"] = self._handshake_timeout
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            accept,
            self._host,
            self._port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            reuse_address=True,
            **extra,
        )
        if self._server.sockets:
            self._bound = self._server.sockets[0].getsockname()[1]
