"""A real `tasgate serve` over TLS, fed what a careless or hostile client sends: one WARNING line
per request, never a traceback, never an ERROR.

A client that promises a 100 GiB body, sends 10 bytes and hangs up is the client's business; so is a
9 KB header line. The log is what an operator reads when something is really wrong: an ERROR with
a traceback for each of these would bury the one that matters (and grow the log at the sender's
pace), and an ``errors{kind="exception"}`` count would page someone (TasgateWebhookErrors).
"""

from __future__ import annotations

import re
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.webhook.test_hardening import TASGATE, free_port

HEADER_FLOOD = 200
GIB = 2**30


class Served:
    """`tasgate serve` on the sample cluster, its stderr in a file."""

    def __init__(self, tmp_path: Path) -> None:
        self.port, self.metrics_port = free_port(), free_port()
        self.log = tmp_path / "serve.log"
        certs = tmp_path / "certs"
        argv = [str(TASGATE), "serve", "--port", str(self.port), "--metrics-port", str(self.metrics_port),
                "--dev-cert-dir", str(certs)]  # fmt: skip
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self.log.open("w"))
        self.wait_for(lambda text: "tasgate serving" in text, "tasgate serve to start")
        self.tls = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        self.wait_for(lambda _: self.listening(), "the webhook port to accept connections")

    def text(self) -> str:
        return self.log.read_text()

    def wait_for(self, seen: Callable[[str], bool], what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not seen(self.text()):
            assert self.proc.poll() is None, f"tasgate serve exited:\n{self.text()}"
            assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{self.text()[-3000:]}"
            time.sleep(0.05)

    def listening(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def send(self, data: bytes, *, answer: bool = False) -> bytes:
        """Send ``data`` on a new TLS connection, then hang up (after the answer, if asked)."""
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        with self.tls.wrap_socket(raw, server_hostname="localhost") as conn:
            conn.sendall(data)
            return conn.recv(65536) if answer else b""

    def errors(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as page:
            text: str = page.read().decode()
        return "\n".join(line for line in text.splitlines() if line.startswith("tasgate_errors_total"))

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(tmp_path)
    yield server
    server.stop()


def lines_about(text: str, pattern: str) -> list[str]:
    return [line for line in text.splitlines() if re.search(pattern, line)]


def assert_quiet(text: str) -> None:
    assert "Traceback" not in text, text[-3000:]
    assert not lines_about(text, r" (ERROR|CRITICAL) "), text[-3000:]


def test_a_client_that_hangs_up_mid_body_is_one_warning_line(served: Served) -> None:
    head = b"POST /%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    served.send(head % b"mutate" + b"Content-Length: %d\r\n\r\n0123456789" % (100 * GIB))
    served.send(head % b"validate" + b'Content-Length: 100\r\n\r\n{"api')
    served.send(head % b"mutate" + b"Transfer-Encoding: chunked\r\n\r\n5\r\nab")
    served.wait_for(lambda text: len(lines_about(text, "hung up")) >= 3, "the three hang-ups logged")
    text = served.text()
    assert_quiet(text)
    hung_up = lines_about(text, "hung up")
    assert len(hung_up) == 3 and all(" WARNING " in line for line in hung_up), hung_up
    assert 'kind="exception"' not in served.errors(), "a hang-up is no failure of tasgate's"
    assert 'kind="disconnected"} 3.0' in served.errors()


def test_a_flood_of_oversized_headers_is_one_short_warning_line_each(served: Served) -> None:
    request = (
        b"POST /mutate HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 + b"\r\nContent-Length: 2\r\n\r\n{}"
    )
    for _ in range(HEADER_FLOOD):
        assert served.send(request, answer=True).startswith(b"HTTP/1.0 400")
    served.wait_for(lambda text: len(lines_about(text, "bad request")) >= HEADER_FLOOD, "every 400 logged")
    text = served.text()
    assert_quiet(text)
    bad = lines_about(text, "bad request")
    assert len(bad) == HEADER_FLOOD and all(" WARNING " in line for line in bad)
    assert not any("aaaa" in line for line in bad), "the sender's bytes are not copied into the log"
    assert max(len(line) for line in bad) < 200, bad[0]
