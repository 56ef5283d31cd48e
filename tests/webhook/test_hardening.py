"""`tasgate serve` under abuse: bad bytes, slow and many connections, weak TLS, clean exits.

Every fault here is one a client can produce on purpose; each is answered in bounded time with
a clear status and at most one log line, never a 500 or a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from tests.webhook.conftest import example_review
from webhook.files.policy import load_policy
from webhook.files.sample import sample_objects
from webhook.serve import certs, listen
from webhook.serve.app import create_app
from webhook.serve.keys import RUNTIME, Settings, StateSource
from webhook.serve.main import Endpoint, _serve
from webhook.serve.tls import server_context

ROOT = Path(__file__).resolve().parents[2]
TASGATE = Path(sys.executable).with_name("tasgate")


def review_bytes(uid: str = "h-1", **labels: str) -> bytes:
    return example_review(uid, **labels)


def app(**settings: Any) -> web.Application:
    return create_app(
        Settings(policy=load_policy("default"), **settings), lambda _: None, StateSource(sample_objects())
    )


@pytest.fixture
async def client(aiohttp_client: Any) -> TestClient[web.Request, web.Application]:
    c: TestClient[web.Request, web.Application] = await aiohttp_client(app())
    return c


# --- 4. bad bytes: a clear 400, never a 500 ------------------------------------------------------


async def test_body_that_is_not_gzip_is_a_400(client: TestClient[web.Request, web.Application]) -> None:
    resp = await client.post("/mutate", data=b"plainly not gzip", headers={"Content-Encoding": "gzip"})
    assert resp.status == 400
    assert "Content-Encoding is gzip but the body does not decode as gzip" in (await resp.json())["error"]


async def test_gzip_body_is_read(client: TestClient[web.Request, web.Application]) -> None:
    import gzip  # noqa: PLC0415

    resp = await client.post(
        "/mutate", data=gzip.compress(review_bytes("gz")), headers={"Content-Encoding": "gzip"}
    )
    assert resp.status == 200 and (await resp.json())["response"]["uid"] == "gz"


@pytest.mark.parametrize(("opening", "closing"), [(b"[", b"]"), (b'{"a":', b"}")])
async def test_a_quantity_nested_1000_deep_is_refused_not_crashed(
    client: TestClient[web.Request, web.Application], opening: bytes, closing: bytes
) -> None:
    body = review_bytes("deep").replace(b'"nvidia.com/gpu":"8"', b'"nvidia.com/gpu":' + b"X", 1)
    assert b":X" in body, "the example requests GPUs"
    body = body.replace(b":X", b":" + opening * 1000 + b'"8"' + closing * 1000, 1)
    for path in ("/mutate", "/validate"):
        resp = await client.post(path, data=body)
        assert resp.status == 200
        answer = (await resp.json())["response"]
        assert answer["uid"] == "deep" and answer["allowed"] is False
        assert answer["status"]["code"] == 400
        assert "more than 100 levels deep" in answer["status"]["message"]


async def test_ordinary_nesting_is_judged(client: TestClient[web.Request, web.Application]) -> None:
    body = review_bytes("ok").replace(b'"metadata":{', b'"metadata":{"x":' + b"[" * 80 + b"]" * 80 + b",", 1)
    answer = (await (await client.post("/mutate", data=body)).json())["response"]
    assert answer["allowed"] is True


# --- listeners: bounded connections and reads ----------------------------------------------------


@contextlib.asynccontextmanager
async def listening(
    tls: ssl.SSLContext | None = None,
    max_connections: int = 1024,
    read_timeout: float = 10.0,
    runners: list[web.AppRunner] | None = None,
) -> AsyncIterator[int]:
    """The app served on a free port; ``runners``, if given, gets its runner (its ``server``
    holds the open connections)."""
    runner = listen.runner(app(read_timeout=read_timeout), read_timeout, 1.0)
    if runners is not None:
        runners.append(runner)
    await runner.setup()
    site = listen.GuardedSite(
        runner,
        "127.0.0.1",
        0,
        ssl_context=tls,
        max_connections=max_connections,
        handshake_timeout=read_timeout,
    )
    await site.start()
    try:
        yield site.port
    finally:
        await runner.cleanup()


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> bytes:
    """Everything the server sent until it closed the connection (fails if it keeps it open)."""
    return await asyncio.wait_for(reader.read(), seconds)


# A stalled client is cut by the 0.5 s read timeout: not at once (never before 0.5 s since it
# connected, a bound no load can break), and long before anything else would end it (the
# upper bound is generous on purpose: a loaded machine stretches it, a missing timeout does not
# end it at all).


async def test_half_sent_request_head_is_closed_within_the_timeout(caplog: pytest.LogCaptureFixture) -> None:
    async with listening(read_timeout=0.5) as port:
        started = time.monotonic()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Le")
        assert await closed_within(reader, 15) == b""
        assert time.monotonic() - started >= 0.5, "cut by the read timeout, not at once"
        writer.close()


async def test_half_sent_body_gets_408_within_the_timeout() -> None:
    async with listening(read_timeout=0.5) as port:
        started = time.monotonic()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b'POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 10000\r\n\r\n{"apiVersion"')
        answer = await closed_within(reader, 15)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:100]
        assert time.monotonic() - started >= 0.5, "cut by the read timeout, not at once"
        writer.close()


async def test_connections_beyond_the_cap_are_refused() -> None:
    """A freed slot is tried once the server has let the closed connection go (its count of
    open connections is below the cap), not after a fixed pause."""
    runners: list[web.AppRunner] = []
    async with listening(max_connections=3, runners=runners) as port:
        held = []
        for _ in range(3):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await reader.readuntil(b"ok")).startswith(b"HTTP/1.1 200")
            held.append((reader, writer))
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert await closed_within(reader, 3) == b"", "the 4th connection is closed unanswered"
        held.pop()[1].close()
        server = runners[0].server
        assert server is not None
        async with asyncio.timeout(10):
            while len(server.connections) >= 3:
                await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await reader.readuntil(b"ok")).startswith(b"HTTP/1.1 200"), "a freed slot is usable"
        for _, w in held:
            w.close()


async def test_malformed_http_is_one_warning_line_without_traceback(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with listening() as port:
        for garbage in (b"GET / HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n"):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(garbage)
            assert re.match(rb"HTTP/1\.[01] 400 ", await closed_within(reader, 3))
            writer.close()
    bad = [
        r
        for r in caplog.records
        if r.name.startswith(("aiohttp", "tasgate.http")) and r.levelno > logging.DEBUG
    ]
    assert len(bad) == 2, [r.getMessage() for r in bad]
    for record in bad:
        assert record.levelno == logging.WARNING and record.exc_info is None
        assert "\n" not in record.getMessage() and "bad request" in record.getMessage()
    assert "Traceback" not in caplog.text


# --- 3. shutdown is bounded, whatever a client does ----------------------------------------------


async def test_shutdown_with_a_stalled_body_finishes_within_the_bound(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The stalled review is cut once the grace runs out (the shutdown says so), not held for
    its 60 s read timeout: bounded by what the server did, and by a wall clock only generously
    (a loaded machine stretches the drain and grace; it does not make 30 s of them)."""
    files = certs.generate(tmp_path, ["localhost"], ["127.0.0.1"])
    served = app(read_timeout=60.0)
    port = free_port()
    at = Endpoint("127.0.0.1", port, read_timeout=60.0, drain_seconds=0.2, grace_seconds=0.5)
    serving = asyncio.create_task(_serve(served, at, server_context(files.cert, files.key)))
    tls = ssl.create_default_context(cafile=str(files.ca_cert))
    for _ in range(100):
        try:
            _reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=tls, server_hostname="localhost"
            )
            break
        except OSError:
            await asyncio.sleep(0.05)
    writer.write(b'POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{"api')
    await writer.drain()
    for _ in range(100):
        if served[RUNTIME].in_flight:
            break
        await asyncio.sleep(0.01)
    assert served[RUNTIME].in_flight == 1, "the stalled review is in flight"
    with caplog.at_level(logging.WARNING, "tasgate"):
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(serving, 30)  # half the read timeout the stalled body would hold it for
    assert any("still in flight after" in r.getMessage() for r in caplog.records), "cut after the grace"
    writer.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# --- 5. TLS: AEAD only ---------------------------------------------------------------------------


async def test_tls12_cbc_suites_are_refused(tmp_path: Path) -> None:
    files = certs.generate(tmp_path, ["localhost"], ["127.0.0.1"])
    async with listening(tls=server_context(files.cert, files.key)) as port:
        for suite in ("ECDHE-ECDSA-AES128-SHA256", "ECDHE-ECDSA-AES256-SHA", "ECDHE-ECDSA-AES128-SHA"):
            weak = ssl.create_default_context(cafile=str(files.ca_cert))
            weak.maximum_version = ssl.TLSVersion.TLSv1_2
            weak.set_ciphers(suite)
            with pytest.raises((ssl.SSLError, ConnectionError)):
                await asyncio.open_connection("127.0.0.1", port, ssl=weak, server_hostname="localhost")
        for suite in ("ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"):
            good = ssl.create_default_context(cafile=str(files.ca_cert))
            good.maximum_version = ssl.TLSVersion.TLSv1_2
            good.set_ciphers(suite)
            _, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=good, server_hostname="localhost"
            )
            assert writer.get_extra_info("cipher")[0] == suite
            writer.close()


# --- the command line: one-line errors, clean exits, nothing left behind -------------------------


def serve(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(TASGATE), "serve", "--port", str(free_port()), "--metrics-port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def test_missing_kubeconfig_is_one_line(tmp_path: Path) -> None:
    proc = serve("--kubeconfig", str(tmp_path / "nonexistent"))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert err.strip().splitlines() == [
        f"tasgate: error: --kubeconfig {tmp_path / 'nonexistent'}: no such file"
    ]


def test_broken_kubeconfig_is_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    proc = serve("--kubeconfig", str(broken))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    assert [line for line in err.splitlines() if "error" in line.lower()] == [
        next(line for line in err.splitlines() if line.startswith("tasgate: error: cannot start:"))
    ]


def test_port_in_use_is_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.Popen(
            [str(TASGATE), "serve", "--port", str(port), "--metrics-port", "0"],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "Traceback" not in err
    assert "tasgate: error: cannot start:" in err


def wait_serving(proc: subprocess.Popen[str]) -> str:
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if "tasgate serving" in line:
            return line
        assert line or proc.poll() is None, "tasgate serve exited"
    raise AssertionError("tasgate serve never said it was serving")


def accepting(port: int, timeout: float = 30.0) -> None:
    """Until a TCP connection to ``port`` on 127.0.0.1 is accepted (paced, bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing accepts on port {port}"
            time.sleep(0.05)


def test_sigint_is_a_clean_exit_and_dev_certs_leave_no_ca_key(tmp_path: Path) -> None:
    """SIGINT is sent once the server accepts connections: its handlers are set by then (the
    "serving" line comes before them)."""
    proc = serve(env={"TMPDIR": str(tmp_path)})
    line = wait_serving(proc)
    found = re.search(r"\(CA: (\S+)/ca\.crt\)", line)
    assert found, line
    where = Path(found.group(1))
    assert where.is_relative_to(tmp_path) and (where / "tls.crt").exists()
    assert not list(tmp_path.rglob("ca.key")), "the CA key is gone once the serving certificate is signed"
    port = re.search(r"https://[^ ]+:(\d+)", line)
    assert port, line
    accepting(int(port.group(1)))  # its signal handlers are set before its port opens
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert not where.exists(), "the temporary certificate directory is removed at exit"
