"""The webhook's TLS server context, and hot reload of a rotated serving certificate.

Certificates rotate under a running server (cert-manager renews them; ``tasgate certs`` reissues
them), and a restart would drop in-flight admission calls, so the pair is reloaded *in place*:
``SSLContext.load_cert_chain`` on the live context changes what new handshakes present, while an
established connection keeps the certificate it negotiated (OpenSSL copies it into each connection).

Rotation is detected by hashing file contents, not by mtime or inotify: a mounted Secret changes by
an atomic swap of the ``..data`` symlink, which fires no event on the files and may keep mtimes.

A new pair is validated twice before it touches the live context: parsed by ``cryptography`` for a
precise message, then loaded into a scratch context so OpenSSL itself has accepted it. Both loads
read a private in-memory snapshot of the bytes that were hashed, so what is validated, what is
installed and the recorded fingerprint are the same bytes even if the files change meanwhile.
This matters because a failed ``load_cert_chain`` can leave a context with a certificate and no key.

With a client CA (``--client-ca-file``) only a client presenting a certificate that chains to it
completes a handshake (``ssl.CERT_REQUIRED``). OpenSSL's trust store only grows (a CA loaded into a
live context cannot be taken out again), so a changed CA file is not loaded in place: the reloader
builds a complete new context (pair and CA) and the live one's ``sni_callback``, which OpenSSL calls
on every handshake, with or without SNI, moves each new connection onto it (``SSL_set_SSL_CTX``:
the certificate presented and the store verified against both come from the new context). No
session tickets are issued, so no client resumes a session past a CA that has been removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import ssl
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

_SPKI = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
# TLS 1.2: forward-secret AEAD suites only (what Go's crypto/tls, the API server's client, prefers);
# no CBC (Lucky13-class padding oracles), no RSA key exchange, no DHE.
TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!eNULL:!SHA1:!SHA256:!SHA384:!CBC"


class TLSConfigError(Exception):
    """The certificate or key cannot be served; the message names the files and says what is wrong.

    Meant to be printed as is (``tasgate serve`` exits with it), so it never needs a traceback.
    """


def server_context(cert: Path, key: Path, client_ca: Path | None = None) -> ssl.SSLContext:
    """A TLS server context serving ``cert`` (leaf first, then any intermediates) with ``key``.

    TLS 1.2 is the floor because the API server never offers less and Kubernetes' own components
    refuse less, and on 1.2 only ECDHE AEAD suites are offered (``TLS12_CIPHERS``); compression
    stays off (CRIME) and renegotiation is refused (a client-driven CPU sink with no use for a
    webhook). With ``client_ca`` every client must present a certificate that CA file vouches for.
    """
    cert, key = Path(cert), Path(key)
    context = _new_context()
    cert_pem, key_pem = _read(cert, "certificate"), _read(key, "private key")
    _install(context, cert, key, cert_pem, key_pem)
    if client_ca is not None:
        _trust(context, Path(client_ca), _read(Path(client_ca), "client CA"))
    return context


class CertReloader:
    """Keeps ``context`` serving the current content of ``cert``/``key``; see the module docstring.

    ``loaded`` and ``last_loaded_fingerprint`` describe the last pair installed (for /readyz);
    ``last_error`` is why the newest content was refused, or None once the files are good again.
    The constructor loads the files once, so the fingerprint is known before ``run`` starts; a bad
    pair then is not raised, only recorded (``loaded`` stays False), as at any later check.
    ``client_ca`` (the one ``context`` was made with) is watched too: pair and CA are one unit, and
    new connections are moved onto the context built from their newest good content (the reloader
    takes ``context.sni_callback`` for that; see the module docstring).
    """

    def __init__(self, context: ssl.SSLContext, cert: Path, key: Path, client_ca: Path | None = None) -> None:
        self.context = context
        self.cert, self.key = Path(cert), Path(key)
        self.client_ca = Path(client_ca) if client_ca is not None else None
        self._serving = context  # with a client CA: what new connections are moved onto
        if self.client_ca is not None:
            context.sni_callback = self._move
        self.loaded = False
        self.last_loaded_fingerprint: str | None = None
        self.last_loaded_at: float | None = None
        self.last_error: TLSConfigError | None = None
        self.not_after: float | None = None  # Unix time the loaded leaf certificate expires
        self._reported: str | None = None
        self.check()

    def fingerprint(self) -> str:
        """SHA-256 over the files' current bytes; raises TLSConfigError if one cannot be read."""
        return _fingerprint(*self._contents())

    def check(self) -> bool:
        """Reload if the files' content changed since the last successful load; True if it reloaded.

        A pair that cannot be used (missing, unparsable, key and cert from different rotations)
        leaves the context as it was and returns False; the next call tries again.
        """
        try:
            contents = self._contents()
            fingerprint = _fingerprint(*contents)
            if fingerprint != self.last_loaded_fingerprint:
                self._load(*contents)
        except TLSConfigError as exc:
            self.last_error = exc
            return False
        self.last_error = None
        if fingerprint == self.last_loaded_fingerprint:
            return False
        self.loaded, self.last_loaded_fingerprint, self.last_loaded_at = True, fingerprint, time.time()
        self.not_after = x509.load_pem_x509_certificates(contents[0])[0].not_valid_after_utc.timestamp()
        return True

    def _contents(self) -> list[bytes]:
        files = [_read(self.cert, "certificate"), _read(self.key, "private key")]
        return files if self.client_ca is None else [*files, _read(self.client_ca, "client CA")]

    def _load(self, cert_pem: bytes, key_pem: bytes, ca_pem: bytes | None = None) -> None:
        if self.client_ca is None or ca_pem is None:
            _install(self.context, self.cert, self.key, cert_pem, key_pem)
            return
        fresh = _new_context()
        _install(fresh, self.cert, self.key, cert_pem, key_pem)
        _trust(fresh, self.client_ca, ca_pem)
        self._serving = fresh

    def _move(self, connection: ssl.SSLObject, server_name: str | None, context: ssl.SSLContext) -> None:
        """The ``sni_callback``: a new connection takes the newest good pair and client CA."""
        if self._serving is not context:
            connection.context = self._serving

    async def run(
        self,
        interval: float,
        on_reload: Callable[[str], None] | None = None,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        """Call ``check`` every ``interval`` seconds until cancelled; never returns otherwise.

        It logs nothing itself: ``on_reload(fingerprint)`` hears of each reload, ``on_error(exc)`` of
        each refused pair (once per distinct problem, not every poll, so a stuck rotation does not
        flood the log) and of any unexpected exception, which does not stop the loop. Exceptions
        raised by the callbacks are passed to ``on_error``, or dropped if ``on_error`` itself fails.
        """
        if not interval > 0:
            raise ValueError(f"interval must be a positive number of seconds, got {interval!r}")
        while True:
            self._poll(on_reload, on_error)
            await asyncio.sleep(interval)

    def _poll(
        self, on_reload: Callable[[str], None] | None, on_error: Callable[[Exception], None] | None
    ) -> None:
        try:
            if self.check():
                self._reported = None
                if on_reload is not None and self.last_loaded_fingerprint is not None:
                    on_reload(self.last_loaded_fingerprint)
            elif self.last_error is None:
                self._reported = None
            elif str(self.last_error) != self._reported:
                self._reported = str(self.last_error)
                _report(on_error, self.last_error)
        except Exception as exc:  # the loop outlives any bug below it; the caller hears of it
            _report(on_error, exc)


def _report(on_error: Callable[[Exception], None] | None, exc: Exception) -> None:
    if on_error is not None:
        with contextlib.suppress(Exception):
            on_error(exc)


def _new_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION | ssl.OP_CIPHER_SERVER_PREFERENCE
    context.set_ciphers(TLS12_CIPHERS)  # TLS 1.3 suites are all AEAD and set apart by OpenSSL
    return context


def _trust(context: ssl.SSLContext, path: Path, ca_pem: bytes) -> None:
    """Require a client certificate that chains to a CA in ``ca_pem`` (the file at ``path``)."""
    try:
        x509.load_pem_x509_certificates(ca_pem)
        context.load_verify_locations(cadata=ca_pem.decode("ascii"))
    except (ValueError, ssl.SSLError):
        raise TLSConfigError(f"TLS client CA file {path} does not hold a PEM certificate") from None
    context.verify_mode = ssl.CERT_REQUIRED
    context.num_tickets = 0  # TLS 1.3: nothing to resume past a CA removed from the file
    context.options |= ssl.OP_NO_TICKET  # TLS 1.2


def _fingerprint(*files: bytes) -> str:
    digest = hashlib.sha256()
    for data in files:  # length-prefixed, so no two different sets hash alike
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise TLSConfigError(f"TLS {what} file {path} does not exist") from None
    except OSError as exc:
        raise TLSConfigError(f"cannot read TLS {what} file {path}: {exc.strerror or exc}") from None


def _install(context: ssl.SSLContext, cert: Path, key: Path, cert_pem: bytes, key_pem: bytes) -> None:
    """Validate the pair, then load exactly these bytes into ``context``; TLSConfigError if unusable."""
    try:
        leaf = x509.load_pem_x509_certificates(cert_pem)[0]
    except ValueError:
        raise TLSConfigError(f"TLS certificate file {cert} does not hold a PEM certificate") from None
    try:
        private = serialization.load_pem_private_key(key_pem, password=None)
    except TypeError:
        raise TLSConfigError(f"TLS private key {key} is encrypted; the server needs it unencrypted") from None
    except (ValueError, UnsupportedAlgorithm):
        raise TLSConfigError(f"TLS private key file {key} does not hold a PEM private key") from None
    if private.public_key().public_bytes(*_SPKI) != leaf.public_key().public_bytes(*_SPKI):
        raise TLSConfigError(
            f"TLS private key {key} does not match certificate {cert} "
            "(files from different pairs, or caught mid-rotation)"
        )
    try:
        with _snapshot(cert_pem, key_pem) as (cert_copy, key_copy):
            _new_context().load_cert_chain(cert_copy, key_copy, password=_no_password)
            context.load_cert_chain(cert_copy, key_copy, password=_no_password)
    except (ssl.SSLError, OSError) as exc:
        raise TLSConfigError(f"OpenSSL refused TLS certificate {cert} with key {key}: {exc}") from None


def _no_password() -> bytes:
    """Stops OpenSSL from prompting on a terminal for an encrypted key's passphrase."""
    raise TLSConfigError("TLS private key is encrypted; the server needs it unencrypted")


@contextlib.contextmanager
def _snapshot(cert_pem: bytes, key_pem: bytes) -> Iterator[tuple[str, str]]:
    """Paths holding exactly these bytes, since ``load_cert_chain`` only reads files.

    On Linux they are memfds (no key on disk, and works with a read-only root filesystem, as
    webhook pods usually have); elsewhere a private temporary directory.
    """
    if sys.platform == "linux" and os.path.isdir("/proc/self/fd"):
        fds: list[int] = []
        try:
            for data in (cert_pem, key_pem):
                fds.append(os.memfd_create("tasgate-tls", os.MFD_CLOEXEC))
                view = memoryview(data)
                while view:
                    view = view[os.write(fds[-1], view) :]
            yield f"/proc/self/fd/{fds[0]}", f"/proc/self/fd/{fds[1]}"
        finally:
            for fd in fds:
                os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="tasgate-tls-") as tmp:
        paths = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        for path, data in zip(paths, (cert_pem, key_pem), strict=True):
            path.write_bytes(data)
        yield str(paths[0]), str(paths[1])
