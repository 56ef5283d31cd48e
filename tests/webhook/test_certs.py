"""Certificate generation: the X.509 fields the API server checks, file handling, input validation.

Chains are checked the way a client checks them (``verify_directly_issued_by``, and a real mutual-TLS
handshake for the client certificate), not by re-reading our own builder calls.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import re
import socket
import ssl
import stat
import threading
from pathlib import Path
from typing import TypeVar

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.serve import certs
from webhook.serve.certs import CertFiles, ca_bundle, client_cert, describe, generate

T = TypeVar("T", bound=x509.ExtensionType)
DNS = ["tasgate-webhook.tasgate-system.svc", "tasgate-webhook.tasgate-system.svc.cluster.local"]
IPS = ["127.0.0.1", "::1"]


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def ext(cert: x509.Certificate, kind: type[T]) -> x509.Extension[T]:
    return cert.extensions.get_extension_for_class(kind)


@pytest.fixture
def files(tmp_path: Path) -> CertFiles:
    return generate(tmp_path / "pki", DNS, IPS, days=30)


def test_writes_the_four_files_with_private_keys_unreadable_by_others(files: CertFiles) -> None:
    out = files.cert.parent
    assert files == CertFiles(out / "ca.crt", out / "ca.key", out / "tls.crt", out / "tls.key")
    assert sorted(p.name for p in out.iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]  # no temp left
    assert stat.S_IMODE(files.key.stat().st_mode) == 0o600
    assert stat.S_IMODE(files.ca_key.stat().st_mode) == 0o600
    assert stat.S_IMODE(files.cert.stat().st_mode) == 0o644
    for key in (files.key, files.ca_key):
        assert isinstance(
            serialization.load_pem_private_key(key.read_bytes(), None), ec.EllipticCurvePrivateKey
        )


def test_serving_certificate_has_what_the_api_server_checks(files: CertFiles) -> None:
    ca, cert = load(files.ca_cert), load(files.cert)
    cert.verify_directly_issued_by(ca)
    sans = ext(cert, x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == DNS
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address(ip) for ip in IPS]
    usage = ext(cert, x509.KeyUsage)
    assert usage.critical and usage.value.digital_signature
    assert not (usage.value.key_cert_sign or usage.value.key_encipherment)
    assert list(ext(cert, x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert ext(cert, x509.BasicConstraints).value.ca is False
    assert ext(cert, x509.SubjectKeyIdentifier).value == x509.SubjectKeyIdentifier.from_public_key(
        cert.public_key()
    )
    ca_ski = ext(ca, x509.SubjectKeyIdentifier).value.digest
    assert ext(cert, x509.AuthorityKeyIdentifier).value.key_identifier == ca_ski
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == DNS[0]
    assert isinstance(cert.signature_hash_algorithm, hashes.SHA256)


def test_validity_is_backdated_five_minutes_and_lasts_the_requested_days(files: CertFiles) -> None:
    cert, now = load(files.cert), dt.datetime.now(dt.UTC)
    backdate = now - cert.not_valid_before_utc
    assert dt.timedelta(minutes=5) <= backdate < dt.timedelta(minutes=6)
    assert abs(cert.not_valid_after_utc - (now + dt.timedelta(days=30))) < dt.timedelta(minutes=1)


def test_ca_is_a_self_signed_certificate_authority(files: CertFiles) -> None:
    ca = load(files.ca_cert)
    ca.verify_directly_issued_by(ca)
    assert ext(ca, x509.BasicConstraints).value.ca is True
    assert ext(ca, x509.KeyUsage).value.key_cert_sign
    assert ca.not_valid_after_utc - ca.not_valid_before_utc >= dt.timedelta(days=certs.CA_DAYS)


def test_reusing_the_ca_reissues_only_the_serving_pair(files: CertFiles) -> None:
    ca_before, serial_before = files.ca_cert.read_bytes(), load(files.cert).serial_number
    again = generate(files.cert.parent, ["other.svc"], ca=(files.ca_cert, files.ca_key))
    assert again == files
    assert files.ca_cert.read_bytes() == ca_before
    cert = load(again.cert)
    assert cert.serial_number != serial_before
    cert.verify_directly_issued_by(load(files.ca_cert))
    assert describe(again.cert)["dns_names"] == ["other.svc"]


def test_reusing_the_ca_elsewhere_copies_its_certificate_but_not_its_key(
    files: CertFiles, tmp_path: Path
) -> None:
    other = generate(tmp_path / "other", ["x.svc"], ca=(files.ca_cert, files.ca_key))
    assert other.ca_key == files.ca_key
    assert other.ca_cert == tmp_path / "other" / "ca.crt"
    assert other.ca_cert.read_bytes() == files.ca_cert.read_bytes()
    assert not (tmp_path / "other" / "ca.key").exists()
    load(other.cert).verify_directly_issued_by(load(files.ca_cert))


def _foreign_rsa_ca(tmp_path: Path, lifetime: dt.timedelta) -> tuple[Path, Path]:
    """An RSA CA made elsewhere, without key identifiers, to show generate() copes with one."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "foreign CA")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + lifetime)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "foreign-ca.crt", tmp_path / "foreign-ca.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pkcs8 = serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    key_path.write_bytes(key.private_bytes(*pkcs8))
    return cert_path, key_path


def test_a_foreign_rsa_ca_signs_and_caps_the_serving_certificate_at_its_own_expiry(tmp_path: Path) -> None:
    ca = _foreign_rsa_ca(tmp_path, dt.timedelta(days=10))
    out = generate(tmp_path / "out", ["a.svc"], days=365, ca=ca)
    ca_cert, cert = load(ca[0]), load(out.cert)
    cert.verify_directly_issued_by(ca_cert)
    assert cert.not_valid_after_utc == ca_cert.not_valid_after_utc
    expected = x509.SubjectKeyIdentifier.from_public_key(ca_cert.public_key()).digest
    assert ext(cert, x509.AuthorityKeyIdentifier).value.key_identifier == expected


def test_unusable_cas_are_refused(files: CertFiles, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not match CA certificate"):
        generate(tmp_path / "a", ["a.svc"], ca=(files.ca_cert, files.key))
    with pytest.raises(ValueError, match="is not a CA certificate"):
        generate(tmp_path / "b", ["a.svc"], ca=(files.cert, files.key))
    with pytest.raises(ValueError, match="expired on"):
        generate(tmp_path / "c", ["a.svc"], ca=_foreign_rsa_ca(tmp_path, -dt.timedelta(hours=1)))
    with pytest.raises(ValueError, match="cannot read CA certificate"):
        generate(tmp_path / "d", ["a.svc"], ca=(tmp_path / "missing.crt", files.ca_key))
    with pytest.raises(ValueError, match="does not hold a PEM private key"):
        generate(tmp_path / "e", ["a.svc"], ca=(files.ca_cert, files.ca_cert))


def test_ca_bundle_is_the_ca_pem_in_base64(files: CertFiles) -> None:
    bundle = ca_bundle(files.ca_cert)
    assert "\n" not in bundle
    assert base64.b64decode(bundle, validate=True) == files.ca_cert.read_bytes()
    with pytest.raises(ValueError, match="does not hold a PEM certificate"):
        ca_bundle(files.key)


def test_describe_reports_what_tasgate_certs_prints(files: CertFiles) -> None:
    info, cert = describe(files.cert), load(files.cert)
    assert info["subject"] == f"CN={DNS[0]}"
    assert info["issuer"] == "CN=tasgate webhook CA"
    assert int(info["serial"], 16) == cert.serial_number
    assert info["dns_names"] == DNS
    assert info["ip_addresses"] == IPS
    assert dt.datetime.fromisoformat(info["not_after"]) == cert.not_valid_after_utc
    assert dt.datetime.fromisoformat(info["not_before"]) == cert.not_valid_before_utc
    assert info["fingerprint_sha256"] == cert.fingerprint(hashes.SHA256()).hex()
    assert info["is_ca"] is False
    assert describe(files.ca_cert)["is_ca"] is True


def test_wildcards_ip_only_duplicates_and_long_names(tmp_path: Path) -> None:
    long_name = ".".join(["a" * 60, "b" * 60, "svc"])
    info = describe(generate(tmp_path / "a", ["*.svc", "*.ns.svc", "X.svc", "x.svc", long_name]).cert)
    assert info["dns_names"] == ["*.svc", "*.ns.svc", "X.svc", long_name]
    info = describe(generate(tmp_path / "b", [], ["10.0.0.1", "10.0.0.1", "fd00::1"]).cert)
    assert info["ip_addresses"] == ["10.0.0.1", "fd00::1"]
    assert info["subject"] == "CN=10.0.0.1"
    info = describe(generate(tmp_path / "c", [long_name]).cert)
    assert info["subject"] == "CN=tasgate"  # a CN holds at most 64 characters; the SAN is what counts


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dns_names": []}, "at least one DNS name or IP address"),
        ({"dns_names": "a.svc"}, "not a single string"),
        ({"dns_names": ["a.svc"], "ips": "10.0.0.1"}, "not a single string"),
        ({"dns_names": [""]}, "non-empty"),
        ({"dns_names": ["bad_name.svc"]}, "not RFC 1123"),
        ({"dns_names": ["-a.svc"]}, "not RFC 1123"),
        ({"dns_names": ["a-.svc"]}, "not RFC 1123"),
        ({"dns_names": ["a..svc"]}, "not RFC 1123"),
        ({"dns_names": ["a" * 64 + ".svc"]}, "not RFC 1123"),
        ({"dns_names": [".".join(["a" * 63] * 4)]}, "at most 253"),
        ({"dns_names": ["a.svc."]}, "trailing dot"),
        ({"dns_names": ["*"]}, "needs a domain"),
        ({"dns_names": ["a.*.svc"]}, "only be the whole first label"),
        ({"dns_names": ["*.*.svc"]}, "only be the whole first label"),
        ({"dns_names": ["a*.svc"]}, "only be the whole first label"),
        ({"dns_names": ["ünïcode.svc"]}, "not RFC 1123"),
        ({"dns_names": ["10.0.0.1"]}, "pass it in ips"),
        ({"dns_names": [], "ips": ["10.0.0.256"]}, "invalid IP address '10.0.0.256'"),
        ({"dns_names": [], "ips": ["a.svc"]}, "invalid IP address"),
        ({"dns_names": [], "ips": ["fe80::1%eth0"]}, "zone"),
        ({"dns_names": ["a.svc"], "days": 0}, "days must be a whole number from 1 to 3650"),
        ({"dns_names": ["a.svc"], "days": 3651}, "days must be"),
        ({"dns_names": ["a.svc"], "days": True}, "days must be"),
    ],
)
def test_invalid_inputs_are_refused_with_a_clear_message(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        generate(tmp_path / "out", **kwargs)  # type: ignore[arg-type]
    assert not (tmp_path / "out").exists()  # nothing half-made


def test_files_are_never_seen_half_written_while_rotating(files: CertFiles) -> None:
    """A poller reading tls.crt in a loop must parse it every time, whatever the rotation is doing."""
    stop, failures, reads = threading.Event(), [], [0]

    def poll() -> None:
        while not stop.is_set():
            try:
                load(files.cert)
                reads[0] += 1
            except Exception as exc:  # any failure at all is the finding
                failures.append(exc)

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        for _ in range(30):
            generate(files.cert.parent, DNS, ca=(files.ca_cert, files.ca_key))
    finally:
        stop.set()
        reader.join()
    assert failures == []
    assert reads[0] > 0
    assert sorted(p.name for p in files.cert.parent.iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]


def test_client_certificate_authenticates_over_mutual_tls(files: CertFiles, tmp_path: Path) -> None:
    cert_path, key_path = client_cert(
        tmp_path / "clients", (files.ca_cert, files.ca_key), "admin", ["system:masters"]
    )
    assert (cert_path.name, key_path.name) == ("client.crt", "client.key")
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    cert = load(cert_path)
    assert list(ext(cert, x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert ext(cert, x509.BasicConstraints).value.ca is False
    assert cert.subject.rfc4514_string() == "CN=admin,O=system:masters"

    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(files.cert, files.key)
    server.load_verify_locations(files.ca_cert)
    server.verify_mode = ssl.CERT_REQUIRED
    client = ssl.create_default_context(cafile=str(files.ca_cert))
    client.load_cert_chain(cert_path, key_path)
    seen: list[x509.Certificate] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def accept() -> None:
            conn, _ = listener.accept()
            with server.wrap_socket(conn, server_side=True) as tls_conn:
                der = tls_conn.getpeercert(binary_form=True)
                assert der is not None
                seen.append(x509.load_der_x509_certificate(der))
                tls_conn.sendall(b"ok")

        thread = threading.Thread(target=accept)
        thread.start()
        with (
            socket.create_connection(listener.getsockname()) as raw,
            client.wrap_socket(raw, server_hostname=DNS[0]) as conn,
        ):
            assert conn.recv(2) == b"ok"
        thread.join(timeout=10)
    assert [c.serial_number for c in seen] == [cert.serial_number]


def test_client_cert_input_validation(files: CertFiles, tmp_path: Path) -> None:
    ca = (files.ca_cert, files.ca_key)
    with pytest.raises(ValueError, match="common_name"):
        client_cert(tmp_path, ca, "", ["system:masters"])
    with pytest.raises(ValueError, match="organization"):
        client_cert(tmp_path, ca, "admin", ["x" * 65])
    with pytest.raises(ValueError, match="not a single string"):
        client_cert(tmp_path, ca, "admin", "system:masters")
    with pytest.raises(ValueError, match="file name stem"):
        client_cert(tmp_path, ca, "admin", [], name="../escape")
    other = client_cert(tmp_path, ca, "viewer", [], name="viewer", days=1)
    assert other == (tmp_path / "viewer.crt", tmp_path / "viewer.key")
    assert describe(other[0])["subject"] == "CN=viewer"
