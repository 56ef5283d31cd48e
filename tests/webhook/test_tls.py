"""The TLS server context and certificate hot reload, over real TLS connections on loopback.

Every assertion about "what is served" is made by a client that trusts only the generated CA and
reads the peer certificate's serial off a completed handshake.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import ssl
import warnings
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from webhook.serve.certs import CertFiles, generate
from webhook.serve.tls import CertReloader, TLSConfigError, server_context

HOST = "tasgate-webhook.tasgate-system.svc"
TIMEOUT = 10.0


@dataclass
class Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    @property
    def serial(self) -> int:
        der = self.writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der).serial_number

    async def echo(self, line: bytes) -> bytes:
        self.writer.write(line + b"\n")
        await self.writer.drain()
        return (await asyncio.wait_for(self.reader.readline(), TIMEOUT)).rstrip(b"\n")

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await self.writer.wait_closed()


def serial(path: Path) -> int:
    return x509.load_pem_x509_certificate(path.read_bytes()).serial_number


def client_context(ca: Path) -> ssl.SSLContext:
    """What the API server does: trust only the caBundle, check the host name."""
    context = ssl.create_default_context(cafile=str(ca))
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    return context


async def echo_lines(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Every test server: each line back as it came, until the client closes."""
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        while line := await reader.readline():
            writer.write(line)
            await writer.drain()
    writer.close()


@dataclass
class Server:
    files: CertFiles
    context: ssl.SSLContext
    host: str
    port: int

    async def connect(self, server_hostname: str | None = HOST, host: str | None = None) -> Conn:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                host or self.host,
                self.port,
                ssl=client_context(self.files.ca_cert),
                server_hostname=server_hostname,
            ),
            TIMEOUT,
        )
        return Conn(reader, writer)


@pytest.fixture
def files(tmp_path: Path) -> CertFiles:
    return generate(tmp_path / "tls", [HOST], ["127.0.0.1", "::1"], days=1)


async def _serve(files: CertFiles, host: str) -> AsyncIterator[Server]:
    context = server_context(files.cert, files.key)
    server = await asyncio.start_server(echo_lines, host, 0, ssl=context)
    try:
        yield Server(files, context, host, server.sockets[0].getsockname()[1])
    finally:
        server.close()


@pytest.fixture
async def server(files: CertFiles) -> AsyncIterator[Server]:
    async for running in _serve(files, "127.0.0.1"):
        yield running


def rotate(files: CertFiles) -> int:
    """Reissue the serving pair from the same CA, atomically, as ``tasgate certs`` does; new serial."""
    generate(files.cert.parent, [HOST], ["127.0.0.1"], days=1, ca=(files.ca_cert, files.ca_key))
    return serial(files.cert)


def replace(target: Path, source: Path) -> None:
    """Swap one file in atomically, as a half-finished rotation would leave it."""
    staged = target.with_name(f".{target.name}.staged")
    shutil.copyfile(source, staged)
    os.replace(staged, target)


async def test_serves_the_certificate_to_a_client_checking_a_dns_san(server: Server) -> None:
    conn = await server.connect(HOST)
    assert conn.serial == serial(server.files.cert)
    assert await conn.echo(b"hello") == b"hello"
    assert conn.writer.get_extra_info("ssl_object").version() in {"TLSv1.2", "TLSv1.3"}
    await conn.close()


async def test_serves_the_certificate_to_a_client_dialling_an_ip_san(server: Server) -> None:
    conn = await server.connect(server_hostname=None)  # the host checked is then the IP itself
    assert conn.serial == serial(server.files.cert)
    await conn.close()


async def test_ipv6_ip_san(files: CertFiles) -> None:
    try:
        with socket.create_server(("::1", 0), family=socket.AF_INET6):
            pass
    except OSError:
        pytest.skip("no IPv6 loopback here")
    async for running in _serve(files, "::1"):
        conn = await running.connect(server_hostname=None)
        assert conn.serial == serial(files.cert)
        await conn.close()


async def test_a_name_outside_the_sans_is_refused(server: Server) -> None:
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
        await server.connect("other.tasgate-system.svc")


def test_context_floor_is_tls_1_2_without_compression(files: CertFiles) -> None:
    context = server_context(files.cert, files.key)
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert context.options & ssl.OP_NO_COMPRESSION
    assert context.options & ssl.OP_NO_RENEGOTIATION


def _tls11_client(ca: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(ca)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        context.minimum_version = context.maximum_version = ssl.TLSVersion.TLSv1_1
    context.set_ciphers("DEFAULT:@SECLEVEL=0")  # TLS 1.1 needs SHA-1, which OpenSSL 3 hides above level 0
    return context


async def _handshake(context: ssl.SSLContext, port: int) -> str:
    def blocking() -> str:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as raw,
            context.wrap_socket(raw, server_hostname=HOST) as conn,
        ):
            return conn.version() or ""

    return await asyncio.to_thread(blocking)


async def test_tls_1_1_client_is_refused(server: Server) -> None:
    # Control: the same client must reach a server that allows TLS 1.1, or the refusal proves nothing.
    permissive = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        permissive.minimum_version = ssl.TLSVersion.TLSv1_1
    permissive.set_ciphers("DEFAULT:@SECLEVEL=0")
    permissive.load_cert_chain(server.files.cert, server.files.key)
    control = await asyncio.start_server(echo_lines, "127.0.0.1", 0, ssl=permissive)
    try:
        version = await _handshake(_tls11_client(server.files.ca_cert), control.sockets[0].getsockname()[1])
    except (OSError, ssl.SSLError):
        version = ""
    finally:
        control.close()
    if version != "TLSv1.1":
        assert server.context.minimum_version == ssl.TLSVersion.TLSv1_2
        pytest.skip("this OpenSSL cannot speak TLS 1.1 at all; checked the configured floor instead")
    with pytest.raises(OSError):  # ssl.SSLError (protocol version alert) or a reset, by timing
        await _handshake(_tls11_client(server.files.ca_cert), server.port)


async def test_rotation_reaches_new_connections_and_spares_open_ones(server: Server) -> None:
    reloader = CertReloader(server.context, server.files.cert, server.files.key)
    assert reloader.loaded and reloader.last_error is None
    assert reloader.last_loaded_fingerprint == reloader.fingerprint()
    assert reloader.check() is False  # nothing changed
    old_serial = serial(server.files.cert)
    before = await server.connect()
    assert before.serial == old_serial

    new_serial = rotate(server.files)
    assert new_serial != old_serial
    assert reloader.check() is True
    assert reloader.last_loaded_fingerprint == reloader.fingerprint()
    assert reloader.check() is False

    after = await server.connect()
    assert after.serial == new_serial
    assert await after.echo(b"new") == b"new"
    assert await before.echo(b"still here") == b"still here"  # the old connection was not dropped
    assert before.serial == old_serial
    await before.close()
    await after.close()


async def test_a_mismatched_pair_keeps_the_old_certificate_served(server: Server, tmp_path: Path) -> None:
    reloader = CertReloader(server.context, server.files.cert, server.files.key)
    loaded = reloader.last_loaded_fingerprint
    old_serial = serial(server.files.cert)
    staged = generate(tmp_path / "next", [HOST], days=1, ca=(server.files.ca_cert, server.files.ca_key))

    replace(server.files.key, staged.key)  # mid-rotation: new key, old certificate
    assert reloader.check() is False
    assert reloader.last_error is not None
    assert "does not match certificate" in str(reloader.last_error)
    assert str(server.files.key) in str(reloader.last_error)
    assert reloader.loaded and reloader.last_loaded_fingerprint == loaded
    conn = await server.connect()
    assert conn.serial == old_serial  # the context still holds a working pair
    await conn.close()
    assert reloader.check() is False  # retried, still refused

    replace(server.files.cert, staged.cert)  # the rotation completes
    assert reloader.check() is True
    assert reloader.last_error is None
    conn = await server.connect()
    assert conn.serial == serial(staged.cert)
    await conn.close()


async def test_missing_or_garbled_files_keep_the_old_certificate_served(server: Server) -> None:
    reloader = CertReloader(server.context, server.files.cert, server.files.key)
    old_serial, key_bytes = serial(server.files.cert), server.files.key.read_bytes()
    server.files.key.unlink()
    assert reloader.check() is False
    assert "does not exist" in str(reloader.last_error)
    server.files.key.write_bytes(b"-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n")
    assert reloader.check() is False
    assert "does not hold a PEM private key" in str(reloader.last_error)
    conn = await server.connect()
    assert conn.serial == old_serial
    await conn.close()
    server.files.key.write_bytes(key_bytes)  # back to the loaded content: no reload, error cleared
    assert reloader.check() is False
    assert reloader.last_error is None


def test_a_reloader_over_bad_files_is_not_ready(files: CertFiles) -> None:
    context = server_context(files.cert, files.key)
    files.key.write_bytes(b"not a key")
    reloader = CertReloader(context, files.cert, files.key)
    assert reloader.loaded is False
    assert reloader.last_loaded_fingerprint is None
    assert reloader.last_error is not None


def _encrypted_copy(key: Path, target: Path) -> Path:
    private = serialization.load_pem_private_key(key.read_bytes(), None)
    target.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        )
    )
    return target


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing cert", "TLS certificate file {cert} does not exist"),
        ("missing key", "TLS private key file {key} does not exist"),
        ("directory as cert", "cannot read TLS certificate file {cert}"),
        ("garbage cert", "TLS certificate file {cert} does not hold a PEM certificate"),
        ("key as cert", "TLS certificate file {cert} does not hold a PEM certificate"),
        ("cert as key", "TLS private key file {key} does not hold a PEM private key"),
        ("mismatched", "TLS private key {key} does not match certificate {cert}"),
        ("encrypted key", "TLS private key {key} is encrypted"),
    ],
)
def test_server_context_errors_name_the_files(
    files: CertFiles, tmp_path: Path, case: str, message: str
) -> None:
    cert, key = files.cert, files.key
    if case == "missing cert":
        cert = tmp_path / "absent.crt"
    elif case == "missing key":
        key = tmp_path / "absent.key"
    elif case == "directory as cert":
        cert = tmp_path
    elif case == "garbage cert":
        cert = tmp_path / "garbage.crt"
        cert.write_text("hello")
    elif case == "key as cert":
        cert = files.key
    elif case == "cert as key":
        key = files.cert
    elif case == "mismatched":
        key = files.ca_key
    elif case == "encrypted key":
        key = _encrypted_copy(files.key, tmp_path / "encrypted.key")
    with pytest.raises(TLSConfigError) as caught:
        server_context(cert, key)
    assert message.format(cert=cert, key=key) in str(caught.value)


class Calls:
    def __init__(self) -> None:
        self.reloads: list[str] = []
        self.errors: list[Exception] = []
        self.changed = asyncio.Event()

    def on_reload(self, fingerprint: str) -> None:
        self.reloads.append(fingerprint)
        self.changed.set()

    def on_error(self, exc: Exception) -> None:
        self.errors.append(exc)
        self.changed.set()

    async def wait(self, what: str) -> None:
        try:
            await asyncio.wait_for(self.changed.wait(), TIMEOUT)
        except TimeoutError:
            pytest.fail(f"the reload loop never reported {what}")
        self.changed.clear()


@pytest.fixture
def cancel_after() -> Iterator[list[asyncio.Task[None]]]:
    tasks: list[asyncio.Task[None]] = []
    yield tasks
    for task in tasks:
        task.cancel()


async def test_run_reloads_and_reports_each_problem_once(
    server: Server, tmp_path: Path, cancel_after: list[asyncio.Task[None]]
) -> None:
    """A bad pair is reported once however many polls see it: counted in polls (each a
    ``check``), not in seconds, which a loaded machine would fill with fewer."""
    reloader = CertReloader(server.context, server.files.cert, server.files.key)
    calls = Calls()
    polls: list[None] = []
    check = reloader.check

    def counted() -> bool:
        polls.append(None)
        return check()

    reloader.check = counted  # type: ignore[method-assign]
    task = asyncio.create_task(reloader.run(0.01, on_reload=calls.on_reload, on_error=calls.on_error))
    cancel_after.append(task)

    new_serial = rotate(server.files)
    await calls.wait("the rotation")
    assert calls.reloads == [reloader.fingerprint()] and calls.errors == []
    conn = await server.connect()
    assert conn.serial == new_serial
    await conn.close()

    staged = generate(tmp_path / "next", [HOST], days=1, ca=(server.files.ca_cert, server.files.ca_key))
    replace(server.files.key, staged.key)
    await calls.wait("the mismatched pair")
    seen = len(polls)
    async with asyncio.timeout(TIMEOUT):
        while len(polls) < seen + 10:  # ten more polls over the same bad pair
            await asyncio.sleep(0.01)
    assert len(calls.errors) == 1 and isinstance(calls.errors[0], TLSConfigError)
    assert "does not match" in str(calls.errors[0])

    replace(server.files.cert, staged.cert)
    await calls.wait("the completed rotation")
    assert len(calls.reloads) == 2
    assert not task.done()

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, TIMEOUT)


async def test_run_survives_a_failing_callback(
    server: Server, cancel_after: list[asyncio.Task[None]]
) -> None:
    reloader = CertReloader(server.context, server.files.cert, server.files.key)
    calls = Calls()

    def exploding_reload(fingerprint: str) -> None:
        raise RuntimeError(f"metrics backend down while reporting {fingerprint}")

    task = asyncio.create_task(reloader.run(0.01, on_reload=exploding_reload, on_error=calls.on_error))
    cancel_after.append(task)
    rotate(server.files)
    await calls.wait("the callback's failure")
    assert isinstance(calls.errors[0], RuntimeError)
    new_serial = rotate(server.files)  # the loop is still polling
    await calls.wait("the second rotation")
    conn = await server.connect()
    assert conn.serial == new_serial
    await conn.close()
    assert not task.done()


async def test_run_refuses_a_non_positive_interval(files: CertFiles) -> None:
    reloader = CertReloader(server_context(files.cert, files.key), files.cert, files.key)
    with pytest.raises(ValueError, match="interval"):
        await reloader.run(0)
