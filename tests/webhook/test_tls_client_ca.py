"""Who may call: ``--client-ca-file`` over real TLS on loopback.

A caller is admitted only by presenting a clientAuth certificate that the CA file vouches for;
everything else (no certificate, another CA's, the trusted CA's *serving* certificate) is refused
in the handshake, before a byte of HTTP. The CA file and the serving pair both reload in place.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509

from tests.webhook.test_tls import HOST, TIMEOUT, echo_lines, replace, serial
from webhook.serve.certs import CertFiles, client_cert, generate
from webhook.serve.tls import CertReloader, TLSConfigError, server_context

Pair = tuple[Path, Path]


@dataclass
class World:
    serving: CertFiles  # the webhook's own CA and serving pair
    callers: CertFiles  # the CA that --client-ca-file names (its serving pair is unused)
    stranger: CertFiles  # another CA, trusted by nobody here
    client_ca: Path  # the file the server reads: a copy of callers.ca_cert, replaced by tests

    def client(self, ca: CertFiles, name: str) -> Pair:
        return client_cert(self.client_ca.parent, (ca.ca_cert, ca.ca_key), name, [], name=name)


@pytest.fixture
def world(tmp_path: Path) -> World:
    made = [generate(tmp_path / d, [HOST], ["127.0.0.1"], days=1) for d in ("tls", "callers", "stranger")]
    client_ca = tmp_path / "client-ca" / "ca.crt"
    client_ca.parent.mkdir()
    client_ca.write_bytes(made[1].ca_cert.read_bytes())
    return World(*made, client_ca=client_ca)


@dataclass
class Server:
    context: ssl.SSLContext
    port: int
    world: World

    async def call(self, pair: Pair | None, *, tls12: bool = False) -> bytes:
        """One line echoed back, or b"" when the server refused the caller (at the handshake)."""
        context = ssl.create_default_context(cafile=str(self.world.serving.ca_cert))
        if pair is not None:
            context.load_cert_chain(*pair)
        if tls12:
            context.maximum_version = ssl.TLSVersion.TLSv1_2
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", self.port, ssl=context, server_hostname=HOST), TIMEOUT
            )
        except (ssl.SSLError, ConnectionError):  # TLS 1.2: the server fails the handshake itself
            return b""
        try:
            writer.write(b"hello\n")
            await writer.drain()
            # TLS 1.3: the client's side completes first; the server verifies and closes.
            return await asyncio.wait_for(reader.readline(), TIMEOUT)
        except (ssl.SSLError, ConnectionError):
            return b""
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()

    async def served_serial(self, pair: Pair) -> int:
        context = ssl.create_default_context(cafile=str(self.world.serving.ca_cert))
        context.load_cert_chain(*pair)
        _, writer = await asyncio.open_connection("127.0.0.1", self.port, ssl=context, server_hostname=HOST)
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await writer.wait_closed()
        return x509.load_der_x509_certificate(der).serial_number


@pytest.fixture
async def server(world: World) -> AsyncIterator[Server]:
    context = server_context(world.serving.cert, world.serving.key, world.client_ca)
    listening = await asyncio.start_server(echo_lines, "127.0.0.1", 0, ssl=context)
    try:
        yield Server(context, listening.sockets[0].getsockname()[1], world)
    finally:
        listening.close()


def test_without_a_client_ca_nothing_is_asked_of_callers(world: World) -> None:
    context = server_context(world.serving.cert, world.serving.key)
    assert context.verify_mode == ssl.CERT_NONE and context.sni_callback is None
    CertReloader(context, world.serving.cert, world.serving.key)
    assert context.sni_callback is None, "without a client CA the reloader loads in place, as before"


def test_with_a_client_ca_a_certificate_is_required(world: World) -> None:
    context = server_context(world.serving.cert, world.serving.key, world.client_ca)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.num_tickets == 0 and context.options & ssl.OP_NO_TICKET
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2


@pytest.mark.parametrize("tls12", [False, True], ids=["tls1.3", "tls1.2"])
async def test_only_a_caller_with_a_certificate_from_the_ca_gets_through(server: Server, tls12: bool) -> None:
    world = server.world
    assert await server.call(world.client(world.callers, "apiserver"), tls12=tls12) == b"hello\n"
    assert await server.call(None, tls12=tls12) == b"", "no client certificate"
    assert await server.call(world.client(world.stranger, "stranger"), tls12=tls12) == b"", "another CA"
    # The right CA, the wrong purpose: a serving certificate (EKU serverAuth) is no client identity.
    assert await server.call((world.callers.cert, world.callers.key), tls12=tls12) == b""


async def test_a_replaced_client_ca_takes_effect_for_new_connections(server: Server, tmp_path: Path) -> None:
    world = server.world
    reloader = CertReloader(server.context, world.serving.cert, world.serving.key, world.client_ca)
    assert reloader.loaded and reloader.last_error is None and reloader.check() is False
    old, new = world.client(world.callers, "old"), world.client(world.stranger, "new")
    context = ssl.create_default_context(cafile=str(world.serving.ca_cert))
    context.load_cert_chain(*old)
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", server.port, ssl=context, server_hostname=HOST
    )

    bundle = tmp_path / "bundle.crt"  # the overlap of a CA rotation: both CAs trusted
    bundle.write_bytes(world.callers.ca_cert.read_bytes() + world.stranger.ca_cert.read_bytes())
    replace(world.client_ca, bundle)
    assert reloader.check() is True
    assert await server.call(old) == b"hello\n" and await server.call(new) == b"hello\n"

    replace(world.client_ca, world.stranger.ca_cert)  # the old CA is gone
    assert reloader.check() is True
    assert await server.call(old) == b"", "a CA removed from the file no longer admits anyone"
    assert await server.call(new) == b"hello\n"
    writer.write(b"still here\n")  # a connection made before the change is not dropped
    assert await asyncio.wait_for(reader.readline(), TIMEOUT) == b"still here\n"
    writer.close()


async def test_a_garbled_client_ca_keeps_the_last_good_one(server: Server) -> None:
    world = server.world
    reloader = CertReloader(server.context, world.serving.cert, world.serving.key, world.client_ca)
    loaded = reloader.last_loaded_fingerprint
    good = world.client_ca.read_bytes()
    world.client_ca.write_text("not a certificate")
    assert reloader.check() is False
    assert f"TLS client CA file {world.client_ca} does not hold a PEM certificate" in str(reloader.last_error)
    assert reloader.last_loaded_fingerprint == loaded
    assert await server.call(world.client(world.callers, "apiserver")) == b"hello\n"
    assert await server.call(None) == b""
    world.client_ca.unlink()
    assert reloader.check() is False and "does not exist" in str(reloader.last_error)
    world.client_ca.write_bytes(good)
    assert reloader.check() is False and reloader.last_error is None  # the loaded content again


async def test_the_serving_certificate_still_rotates_with_a_client_ca(server: Server) -> None:
    world = server.world
    reloader = CertReloader(server.context, world.serving.cert, world.serving.key, world.client_ca)
    caller = world.client(world.callers, "apiserver")
    assert await server.served_serial(caller) == serial(world.serving.cert)
    rotated = generate(
        world.serving.cert.parent,
        [HOST],
        ["127.0.0.1"],
        days=1,
        ca=(world.serving.ca_cert, world.serving.ca_key),
    )
    assert reloader.check() is True
    assert await server.served_serial(caller) == serial(rotated.cert)
    assert await server.call(None) == b"", "the rotated context still requires a client certificate"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "TLS client CA file {ca} does not exist"),
        ("hello", "TLS client CA file {ca} does not hold a PEM certificate"),
        ("key", "TLS client CA file {ca} does not hold a PEM certificate"),
    ],
)
def test_server_context_errors_name_the_client_ca_file(
    world: World, tmp_path: Path, content: str | None, message: str
) -> None:
    ca = tmp_path / "given-ca.crt"
    if content == "key":
        ca.write_bytes(world.callers.ca_key.read_bytes())
    elif content is not None:
        ca.write_text(content)
    with pytest.raises(TLSConfigError) as caught:
        server_context(world.serving.cert, world.serving.key, ca)
    assert message.format(ca=ca) in str(caught.value)


@pytest.mark.parametrize("tls12", [False, True], ids=["tls1.3", "tls1.2"])
async def test_no_session_outlives_a_ca_change(server: Server, tls12: bool) -> None:
    """A client that kept its session from before the CA was replaced cannot resume it."""
    world = server.world
    reloader = CertReloader(server.context, world.serving.cert, world.serving.key, world.client_ca)
    context = ssl.create_default_context(cafile=str(world.serving.ca_cert))
    context.load_cert_chain(*world.client(world.callers, "apiserver"))
    if tls12:
        context.maximum_version = ssl.TLSVersion.TLSv1_2

    def call(session: ssl.SSLSession | None) -> tuple[bytes, ssl.SSLSession | None]:
        try:
            with (
                socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as raw,
                context.wrap_socket(raw, server_hostname=HOST, session=session) as tls,
            ):
                tls.sendall(b"hello\n")
                return tls.recv(16), tls.session
        except (ssl.SSLError, ConnectionError):
            return b"", None

    answer, session = await asyncio.to_thread(call, None)
    assert answer == b"hello\n" and session is not None
    replace(world.client_ca, world.stranger.ca_cert)
    assert reloader.check() is True
    assert (await asyncio.to_thread(call, session))[0] == b""
