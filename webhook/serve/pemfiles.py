"""PEM files for the webhook's certificates: read with clear errors, written atomically.

The server polls its certificate files for rotation, so a reader must never see a torn file:
each file goes to a hidden temp file in the same directory, then ``os.replace`` renames it into
place; the key is written before its certificate.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

SigningKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


def read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc


def read_certs(path: Path, what: str) -> tuple[bytes, list[x509.Certificate]]:
    pem = read(path, what)
    try:
        return pem, x509.load_pem_x509_certificates(pem)
    except ValueError:
        raise ValueError(f"{what} {path} does not hold a PEM certificate") from None


def write_pair(out_dir: Path, stem: str, cert: x509.Certificate, key: SigningKey) -> tuple[Path, Path]:
    """Key first: a poller that catches the gap sees a key without its cert, never the reverse."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = out_dir / f"{stem}.crt", out_dir / f"{stem}.key"
    pkcs8 = serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    write_atomic(key_path, key.private_bytes(*pkcs8), 0o600)
    write_atomic(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    with contextlib.suppress(OSError):  # make the renames durable; some filesystems refuse this
        fd = os.open(out_dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return cert_path, key_path


def write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Write via a hidden temp file in the same directory (so ``os.replace`` is a rename, not a copy)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
