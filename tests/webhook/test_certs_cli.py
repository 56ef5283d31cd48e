"""`tasgate certs` run again keeps the CA every caBundle already carries, and says what it wrote.

The API server trusts exactly the CA in each webhook's ``caBundle``: a second run that replaced
``ca.crt`` would leave every bundle made from the first run pointing at a CA that signs nothing
any more, and every review would fail TLS (fail closed: every gated CREATE refused). So a second
run signs a fresh serving pair with the CA it finds, and only ``--rotate-ca`` (alias ``--force``)
replaces it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509

from tests.webhook.conftest import Run, tasgate
from webhook.serve import certs


def make(out: Path, *extra: str) -> Run:
    return tasgate("certs", "--dns-name", "tasgate.tasgate-system.svc", "--out", str(out), *extra)


def chain_holds(out: Path) -> None:
    ca = x509.load_pem_x509_certificate((out / "ca.crt").read_bytes())
    x509.load_pem_x509_certificate((out / "tls.crt").read_bytes()).verify_directly_issued_by(ca)


def test_a_second_run_keeps_the_ca_and_its_ca_bundle(tmp_path: Path) -> None:
    out = tmp_path / "certs"
    first = make(out)
    assert first.code == 0, first.err
    ca, ca_key, serving = ((out / n).read_bytes() for n in ("ca.crt", "ca.key", "tls.crt"))
    assert "created CA" in first.err and str(out / "ca.crt") in first.err
    again = make(out)
    assert again.code == 0, again.err
    assert (out / "ca.crt").read_bytes() == ca and (out / "ca.key").read_bytes() == ca_key
    assert again.out == first.out == certs.ca_bundle(out / "ca.crt") + "\n", "the same caBundle"
    assert (out / "tls.crt").read_bytes() != serving, "a fresh serving certificate"
    chain_holds(out)
    assert "kept CA" in again.err and "created CA" not in again.err
    assert f"wrote {out / 'tls.crt'}" in again.err


@pytest.mark.parametrize("flag", ["--rotate-ca", "--force"])
def test_rotate_ca_replaces_the_ca_and_says_the_bundles_must_change(tmp_path: Path, flag: str) -> None:
    out = tmp_path / "certs"
    first = make(out)
    rotated = make(out, flag)
    assert rotated.code == 0, rotated.err
    assert rotated.out != first.out
    assert "replaced CA" in rotated.err and "caBundle" in rotated.err
    chain_holds(out)


def test_a_ca_certificate_without_its_key_is_refused_not_replaced(tmp_path: Path) -> None:
    out = tmp_path / "certs"
    make(out)
    ca = (out / "ca.crt").read_bytes()
    (out / "ca.key").unlink()
    refused = make(out)
    assert refused.code == 2
    assert "ca.key" in refused.err and "--rotate-ca" in refused.err
    assert (out / "ca.crt").read_bytes() == ca
    assert make(out, "--rotate-ca").code == 0
