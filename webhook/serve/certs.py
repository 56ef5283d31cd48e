"""Certificates for the webhook's HTTPS endpoint: a small private CA, a serving cert, client certs.

The API server calls an admission webhook over HTTPS and trusts exactly the CA written into the
webhook configuration's ``clientConfig.caBundle``; no public CA will sign ``*.svc`` names, so the
project mints its own CA and hands its PEM (base64, see ``ca_bundle``) to that field.

Keys are ECDSA P-256: the API server is a Go ``crypto/tls`` client, which verifies P-256/SHA-256
signatures and offers ECDHE-ECDSA suites by default, as do every kubectl and curl the harness uses.
Against RSA 2048 it buys keys generated in microseconds instead of up to a second (tests rotate
many times) and smaller handshakes, at no loss in compatibility. A CA given to ``generate`` may
still hold an RSA key; it signs the same way.

Files are written atomically (temp file in the same directory, then ``os.replace``) because the
server polls them for rotation (``webhook.serve.tls.CertReloader``) and must never read a torn file.
Each file is replaced on its own, so a reader can briefly see a new ``tls.key`` next to the old
``tls.crt``; the reloader validates the pair before using it and retries, which is why the key is
written first (the torn state is then "key ahead", never a certificate without its key).
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.serve.pemfiles import SigningKey, read, read_certs, write_atomic, write_pair

MIN_DAYS = 1
MAX_DAYS = 3650
# The CA outlives many serving-cert rotations: replacing it means re-patching every caBundle.
CA_DAYS = MAX_DAYS
# Backdated so a node whose clock lags a few minutes does not reject a brand-new certificate.
BACKDATE = dt.timedelta(minutes=5)
_MAX_DNS_LENGTH = 253
_MAX_NAME_ATTRIBUTE = 64  # RFC 5280 upper bound for CN and O
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?", re.IGNORECASE | re.ASCII)
_FILE_STEM = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class CertFiles:
    """Where ``generate`` put things; ``ca_key`` is the caller's own file when a CA was reused."""

    ca_cert: Path
    ca_key: Path
    cert: Path
    key: Path


class CertDescription(TypedDict):
    """What ``tasgate certs`` prints about one certificate (JSON-friendly: strings, lists, bools)."""

    subject: str
    issuer: str
    serial: str
    dns_names: list[str]
    ip_addresses: list[str]
    not_before: str
    not_after: str
    fingerprint_sha256: str
    is_ca: bool


def generate(
    out_dir: Path,
    dns_names: Sequence[str],
    ips: Sequence[str] = (),
    days: int = 365,
    ca: tuple[Path, Path] | None = None,
) -> CertFiles:
    """Write ``ca.crt``, ``ca.key``, ``tls.crt`` and ``tls.key`` for a webhook serving ``dns_names``/``ips``.

    With ``ca=(ca_cert, ca_key)`` the existing CA signs a fresh serving pair (rotation without touching
    the caBundle); its certificate file is copied to ``out_dir/ca.crt`` but its key is *not* copied:
    ``out_dir`` usually becomes the webhook's Secret, and a CA key there could mint any identity.
    A reused CA's expiry caps the serving certificate's, since a chain is dead once its CA is.
    """
    names, addresses = _check_dns_names(dns_names), _check_ips(ips)
    if not names and not addresses:
        raise ValueError(
            "a serving certificate needs at least one DNS name or IP address: the API server checks "
            "the host it dials against the certificate's subjectAltName"
        )
    _check_days(days)
    out_dir = Path(out_dir)
    if ca is None:
        ca_key: SigningKey = ec.generate_private_key(ec.SECP256R1())
        ca_name = [x509.NameAttribute(NameOID.COMMON_NAME, "tasgate webhook CA")]
        ca_cert = _sign(ca_name, ca_key, None, ca_key, _days_from_now(CA_DAYS), [])
        ca_cert_path, ca_key_path = write_pair(out_dir, "ca", ca_cert, ca_key)
    else:
        ca_cert, ca_key, ca_pem = _load_ca(Path(ca[0]), Path(ca[1]))
        ca_cert_path, ca_key_path = out_dir / "ca.crt", Path(ca[1])
        out_dir.mkdir(parents=True, exist_ok=True)
        if not (ca_cert_path.exists() and ca_cert_path.samefile(ca[0])):
            write_atomic(ca_cert_path, ca_pem, 0o644)
    fitting = [n for n in [*names, *map(str, addresses)] if len(n) <= _MAX_NAME_ATTRIBUTE]
    subject = [x509.NameAttribute(NameOID.COMMON_NAME, (fitting or ["tasgate"])[0])]
    sans = x509.SubjectAlternativeName([*map(x509.DNSName, names), *map(x509.IPAddress, addresses)])
    key = ec.generate_private_key(ec.SECP256R1())
    eku = x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH])
    cert = _sign(subject, key, ca_cert, ca_key, _days_from_now(days), [eku, sans])
    return CertFiles(ca_cert_path, ca_key_path, *write_pair(out_dir, "tls", cert, key))


def ca_bundle(ca_cert: Path) -> str:
    """The CA file base64-encoded, as ``clientConfig.caBundle`` wants it (PEM inside base64, one line)."""
    return base64.b64encode(read_certs(Path(ca_cert), "CA certificate")[0]).decode("ascii")


def client_cert(
    out_dir: Path,
    ca: tuple[Path, Path],
    common_name: str,
    organizations: Sequence[str],
    *,
    name: str = "client",
    days: int = 365,
) -> tuple[Path, Path]:
    """Write ``<name>.crt``/``<name>.key``, a clientAuth certificate signed by ``ca``; returns both paths.

    The API server maps a client certificate's CN to the user name and each O to a group, so
    ``organizations=["system:masters"]`` yields a cluster admin for the end-to-end harness.
    """
    if isinstance(organizations, str):
        raise ValueError("organizations must be a list of group names, not a single string")
    for label, value in [("common_name", common_name), *(("organization", o) for o in organizations)]:
        if not isinstance(value, str) or not 1 <= len(value) <= _MAX_NAME_ATTRIBUTE:
            raise ValueError(f"{label} {value!r} must be a string of 1-{_MAX_NAME_ATTRIBUTE} characters")
    if not _FILE_STEM.fullmatch(name):
        raise ValueError(f"name {name!r} must be a plain file name stem (letters, digits, '.', '_', '-')")
    _check_days(days)
    ca_cert, ca_key, _ = _load_ca(Path(ca[0]), Path(ca[1]))
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    key = ec.generate_private_key(ec.SECP256R1())
    eku = x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])
    return write_pair(
        Path(out_dir), name, _sign(subject, key, ca_cert, ca_key, _days_from_now(days), [eku]), key
    )


def describe(cert: Path) -> CertDescription:
    """The first certificate in ``cert`` as plain data; times are UTC ISO 8601, serial is hex."""
    parsed = read_certs(Path(cert), "certificate")[1][0]
    try:
        san = parsed.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns, ips = san.get_values_for_type(x509.DNSName), san.get_values_for_type(x509.IPAddress)
    except x509.ExtensionNotFound:
        dns, ips = [], []
    return CertDescription(
        subject=parsed.subject.rfc4514_string(),
        issuer=parsed.issuer.rfc4514_string(),
        serial=format(parsed.serial_number, "x"),
        dns_names=list(dns),
        ip_addresses=[str(ip) for ip in ips],
        not_before=parsed.not_valid_before_utc.isoformat(),
        not_after=parsed.not_valid_after_utc.isoformat(),
        fingerprint_sha256=parsed.fingerprint(hashes.SHA256()).hex(),
        is_ca=_is_ca(parsed),
    )


def _check_dns_names(dns_names: Sequence[str]) -> list[str]:
    if isinstance(dns_names, str):
        raise ValueError("dns_names must be a list of names, not a single string")
    names: list[str] = []
    for name in dns_names:
        problem = f"invalid DNS name {name!r}"
        if not isinstance(name, str) or not name:
            raise ValueError(f"{problem}: must be a non-empty string")
        if _parse_ip(name) is not None:
            raise ValueError(f"{problem}: it is an IP address; pass it in ips so it becomes an IP SAN")
        if len(name) > _MAX_DNS_LENGTH or name.endswith("."):
            raise ValueError(f"{problem}: at most {_MAX_DNS_LENGTH} characters and no trailing dot")
        labels = name.split(".")
        if labels[0] == "*" and len(labels) == 1:
            raise ValueError(f"{problem}: a wildcard needs a domain after it, as in '*.svc'")
        for label in labels[1:] if labels[0] == "*" else labels:
            if "*" in label:
                raise ValueError(f"{problem}: a wildcard may only be the whole first label, as in '*.svc'")
            if not _LABEL.fullmatch(label):
                raise ValueError(
                    f"{problem}: label {label!r} is not RFC 1123 (1-63 letters, digits or '-', "
                    "starting and ending with a letter or digit)"
                )
        if name.lower() not in (n.lower() for n in names):
            names.append(name)
    return names


def _check_ips(ips: Sequence[str]) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    if isinstance(ips, str):
        raise ValueError("ips must be a list of addresses, not a single string")
    parsed: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    for text in ips:
        address = _parse_ip(text)
        if address is None:
            raise ValueError(f"invalid IP address {text!r}: not an IPv4 or IPv6 address")
        if isinstance(address, ipaddress.IPv6Address) and address.scope_id:
            raise ValueError(f"invalid IP address {text!r}: a zone ('%...') cannot go in a certificate")
        if address not in parsed:
            parsed.append(address)
    return parsed


def _parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _check_days(days: int) -> None:
    if isinstance(days, bool) or not isinstance(days, int) or not MIN_DAYS <= days <= MAX_DAYS:
        raise ValueError(f"days must be a whole number from {MIN_DAYS} to {MAX_DAYS}, got {days!r}")


def _days_from_now(days: int) -> dt.datetime:
    return dt.datetime.now(dt.UTC) + dt.timedelta(days=days)


def _sign(
    subject: list[x509.NameAttribute[str]],
    key: SigningKey,
    issuer: x509.Certificate | None,
    signer: SigningKey,
    not_after: dt.datetime,
    extensions: list[x509.ExtensionType],
) -> x509.Certificate:
    """Sign ``key`` into a certificate; ``issuer=None`` makes the self-signed CA (pathlen 0, certSign).

    End-entity certs get digitalSignature only: their keys are ECDSA, so there is nothing to encipher.
    """
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    issuer_ski = ski
    if issuer is not None:  # a CA made elsewhere may lack an SKI; derive it from its key as RFC 5280 does
        found = [e.value for e in issuer.extensions if isinstance(e.value, x509.SubjectKeyIdentifier)]
        issuer_ski = found[0] if found else x509.SubjectKeyIdentifier.from_public_key(signer.public_key())
    is_ca = issuer is None
    # digitalSignature, contentCommitment, keyEncipherment, dataEncipherment, keyAgreement,
    # keyCertSign, cRLSign, encipherOnly, decipherOnly
    usage = x509.KeyUsage(True, False, False, False, False, is_ca, is_ca, False, False)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(subject))
        .issuer_name(x509.Name(subject) if issuer is None else issuer.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(dt.datetime.now(dt.UTC) - BACKDATE)
        .not_valid_after(not_after if issuer is None else min(not_after, issuer.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=0 if is_ca else None), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(ski, critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(issuer_ski), critical=False
        )
    )
    for extension in extensions:
        builder = builder.add_extension(extension, critical=False)
    return builder.sign(signer, hashes.SHA256())


def _load_ca(cert_path: Path, key_path: Path) -> tuple[x509.Certificate, SigningKey, bytes]:
    """The CA to sign with, refusing anything that would produce a chain the API server rejects."""
    pem, certs = read_certs(cert_path, "CA certificate")
    ca_cert = certs[0]
    if not _is_ca(ca_cert):
        raise ValueError(f"{cert_path} is not a CA certificate (basicConstraints CA:TRUE is missing)")
    if ca_cert.not_valid_after_utc <= dt.datetime.now(dt.UTC):
        raise ValueError(f"CA certificate {cert_path} expired on {ca_cert.not_valid_after_utc.isoformat()}")
    try:
        key = serialization.load_pem_private_key(read(key_path, "CA key"), password=None)
    except TypeError:
        raise ValueError(f"CA key {key_path} is encrypted; decrypt it first") from None
    except ValueError as exc:
        raise ValueError(f"{key_path} does not hold a PEM private key: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ValueError(f"CA key {key_path} is {type(key).__name__}; only ECDSA and RSA CAs are supported")
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(*spki) != ca_cert.public_key().public_bytes(*spki):
        raise ValueError(f"CA key {key_path} does not match CA certificate {cert_path}")
    return ca_cert, key, pem


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        return False
