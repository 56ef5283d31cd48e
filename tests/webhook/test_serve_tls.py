"""`tasgate serve` for real: a TLS socket, certificate rotation while serving, SIGTERM drain."""

from __future__ import annotations

import asyncio
import http.client
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession, TCPConnector

from tests.webhook.conftest import example_review
from webhook.decide.reasons import Reason
from webhook.decide.review import Outcome
from webhook.files.policy import load_policy
from webhook.files.sample import sample_objects
from webhook.serve import certs, deciding
from webhook.serve.app import create_app
from webhook.serve.keys import RUNTIME, Settings, StateSource
from webhook.serve.main import Endpoint, _serve
from webhook.serve.tls import server_context

ROOT = Path(__file__).resolve().parents[2]
TASGATE = Path(sys.executable).with_name("tasgate")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def client_context(ca: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.check_hostname = True
    return ctx


def review_body(uid: str = "tls-1") -> bytes:
    return example_review(uid)


def peer_serial(port: int, ca: Path) -> int:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        client_context(ca).wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    from cryptography import x509  # noqa: PLC0415

    return x509.load_der_x509_certificate(der).serial_number


def get(conn: http.client.HTTPSConnection, path: str) -> tuple[int, str]:
    conn.request("GET", path)
    resp = conn.getresponse()
    return resp.status, resp.read().decode()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    port = free_port()
    proc = subprocess.Popen(
        [
            str(TASGATE),
            "serve",
            "--port",
            str(port),
            "--dev-cert-dir",
            str(tmp_path),
            "--cert-poll-seconds",
            "0.2",
            "--drain-seconds",
            "1",
            "--metrics-port",
            str(free_port()),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    ca = tmp_path / "ca.crt"
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            raise AssertionError(
                f"tasgate serve exited: {proc.stderr.read().decode() if proc.stderr else ''}"
            )
        try:
            conn = http.client.HTTPSConnection("localhost", port, context=client_context(ca), timeout=2)
            if get(conn, "/readyz")[0] == 200:
                break
        except (OSError, ssl.SSLError):
            pass
        assert time.monotonic() < deadline, "tasgate serve did not become ready"
        time.sleep(0.1)
    yield proc, port, tmp_path
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


def test_review_over_tls_and_audit_line(served: tuple[subprocess.Popen[bytes], int, Path]) -> None:
    proc, port, certs_dir = served
    conn = http.client.HTTPSConnection(
        "localhost", port, context=client_context(certs_dir / "ca.crt"), timeout=5
    )
    conn.request(
        "POST", "/mutate?timeout=10s", body=review_body("tls-1"), headers={"Content-Type": "application/json"}
    )
    resp = conn.getresponse()
    answer = orjson.loads(resp.read())
    assert (
        resp.status == 200 and answer["response"]["uid"] == "tls-1" and answer["response"]["allowed"] is True
    )
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    lines = [orjson.loads(line) for line in out.splitlines() if line.strip()]
    assert any(line["uid"] == "tls-1" and line["decision"] == "allow" for line in lines)


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
def test_tls_below_1_2_is_refused(served: tuple[subprocess.Popen[bytes], int, Path]) -> None:
    _, port, certs_dir = served
    ctx = client_context(certs_dir / "ca.crt")
    ctx.minimum_version = ssl.TLSVersion.TLSv1
    ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    with (
        pytest.raises((ssl.SSLError, ConnectionResetError)),
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="localhost"),
    ):
        pass


def test_certificate_rotation_while_serving_keeps_connections(
    served: tuple[subprocess.Popen[bytes], int, Path],
) -> None:
    _, port, certs_dir = served
    ca = certs_dir / "ca.crt"
    before = peer_serial(port, ca)
    kept = http.client.HTTPSConnection("localhost", port, context=client_context(ca), timeout=5)
    assert get(kept, "/healthz") == (200, "ok")
    rotated = certs.generate(certs_dir, ["localhost"], ["127.0.0.1"], ca=(ca, certs_dir / "ca.key"))
    assert certs.describe(rotated.cert)["serial"] != format(before, "x")
    deadline = time.monotonic() + 10
    while peer_serial(port, ca) == before:
        assert time.monotonic() < deadline, "the rotated certificate was never served"
        time.sleep(0.1)
    assert get(kept, "/healthz") == (200, "ok"), "a connection opened before the rotation still works"


def test_sigterm_turns_readiness_off_then_exits(served: tuple[subprocess.Popen[bytes], int, Path]) -> None:
    proc, port, certs_dir = served
    conn = http.client.HTTPSConnection(
        "localhost", port, context=client_context(certs_dir / "ca.crt"), timeout=5
    )
    assert get(conn, "/readyz")[0] == 200
    proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10  # until the signal is handled: polled, not a fixed pause
    while (answer := get(conn, "/readyz"))[0] == 200:
        assert time.monotonic() < deadline, "SIGTERM never turned readiness off"
        time.sleep(0.01)
    status, text = answer
    assert status == 503 and "draining" in text
    assert proc.wait(20) == 0
    assert proc.stderr is not None
    log = proc.stderr.read().decode()
    assert "draining" in log and "stopped" in log


async def test_in_flight_review_finishes_after_sigterm(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """SIGTERM comes while the review is being decided (its judge entered), the decision goes
    on for 0.5 s after the server has stopped listening, and the review is still answered. A
    decision caught mid-flight is a fault injected on purpose: its 0.5 s is the fault held, not
    a wait for something (a loaded machine lengthens it, which the 10 s grace absorbs)."""
    entered, released = threading.Event(), threading.Event()

    def slow(*args: Any) -> Outcome:
        entered.set()
        released.wait(10)
        return Outcome(True, Reason.FITS)

    monkeypatch.setattr(deciding, "judge", slow)
    files = certs.generate(tmp_path, ["localhost"], ["127.0.0.1"])
    audit: list[dict[str, Any]] = []
    app = create_app(Settings(policy=load_policy("default")), audit.append, StateSource(sample_objects()))
    port = free_port()
    serving = asyncio.create_task(
        _serve(app, Endpoint("127.0.0.1", port), server_context(files.cert, files.key))
    )
    connector = TCPConnector(ssl=client_context(files.ca_cert))
    async with ClientSession(connector=connector) as session:
        async with asyncio.timeout(30):
            while True:
                try:
                    async with session.get(f"https://localhost:{port}/healthz") as resp:
                        if resp.status == 200:
                            break
                except OSError:
                    pass
                await asyncio.sleep(0.05)
        pending = asyncio.create_task(
            session.post(f"https://localhost:{port}/mutate", data=review_body("late"))
        )
        try:
            async with asyncio.timeout(10):
                while not entered.is_set():
                    await asyncio.sleep(0.01)
                os.kill(os.getpid(), signal.SIGTERM)
                while not app[RUNTIME].draining or listening(port):
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.5)  # the fault: the decision outlasts the listening by 0.5 s
        finally:
            released.set()
        resp = await asyncio.wait_for(pending, 10)
        assert resp.status == 200
        assert (await resp.json())["response"]["uid"] == "late"
    await asyncio.wait_for(serving, 10)
    assert [a["uid"] for a in audit] == ["late"]


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def test_client_ca_file_admits_only_callers_it_vouches_for(tmp_path: Path) -> None:
    """The real process: /readyz answers a caller with a certificate from the CA, and nobody else."""
    callers = certs.generate(tmp_path / "callers", ["localhost"])
    caller = certs.client_cert(tmp_path, (callers.ca_cert, callers.ca_key), "kube-apiserver", [])
    port = free_port()
    argv = [str(TASGATE), "serve", "--port", str(port), "--dev-cert-dir", str(tmp_path / "tls")]
    proc = subprocess.Popen(
        [*argv, "--client-ca-file", str(callers.ca_cert), "--metrics-port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                trusted = client_context(tmp_path / "tls" / "ca.crt")  # written by the server
                trusted.load_cert_chain(*caller)
                conn = http.client.HTTPSConnection("localhost", port, context=trusted, timeout=2)
                if get(conn, "/readyz")[0] == 200:
                    break
            except (OSError, ssl.SSLError):
                pass
            assert time.monotonic() < deadline, "tasgate serve did not become ready"
            time.sleep(0.1)
        anonymous = http.client.HTTPSConnection(
            "localhost", port, context=client_context(tmp_path / "tls" / "ca.crt"), timeout=5
        )
        with pytest.raises((ssl.SSLError, ConnectionError)):  # no HTTP answer: refused in the handshake
            get(anonymous, "/readyz")
    finally:
        proc.terminate()
        proc.wait(20)
    assert proc.stderr is not None
    assert f"callers must present a client certificate from {callers.ca_cert}" in proc.stderr.read().decode()
