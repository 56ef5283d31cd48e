"""The directory `tasgate certs` maintains: its CA is kept from one run to the next.

Every webhook configuration, Secret and Helm value made from the first run carries that run's
``ca.crt`` as its ``caBundle``; the API server trusts nothing else. A second run that minted a new
CA would leave all of them trusting a CA that signs nothing any more, and every review would fail
TLS (with ``failurePolicy: Fail``, every gated CREATE refused). So a run that finds ``ca.crt`` and
``ca.key`` signs a fresh serving pair with them; only ``rotate_ca`` replaces the CA, and the
report says which happened, so nobody learns it from refused submissions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from webhook.serve import certs
from webhook.serve.certs import CertFiles

CA_CERT, CA_KEY = "ca.crt", "ca.key"


@dataclass(frozen=True)
class Issued:
    """What a run did: the files, and whether the CA was created, kept or replaced."""

    files: CertFiles
    ca: str  # "created", "kept" or "replaced"
    previous_fingerprint: str | None = None  # the replaced CA's

    def report(self) -> list[str]:
        """Lines for stderr: what was written and what was kept, and what the caller must do next."""
        described = certs.describe(self.files.ca_cert)
        fingerprint, until = described["fingerprint_sha256"][:16], described["not_after"][:10]
        serving = certs.describe(self.files.cert)
        names = ", ".join([*serving["dns_names"], *serving["ip_addresses"]])
        ca = {
            "created": f"created CA {self.files.ca_cert} and {self.files.ca_key} (sha256 {fingerprint}…, "
            f"valid until {until}): the caBundle on stdout is new",
            "kept": f"kept CA {self.files.ca_cert} (sha256 {fingerprint}…, valid until {until}): every "
            "caBundle made from it stays valid (--rotate-ca replaces it)",
            "replaced": f"replaced CA {self.files.ca_cert} (was sha256 {self.previous_fingerprint}…, now "
            f"{fingerprint}…): update every caBundle made from the old one with the caBundle on stdout",
        }[self.ca]
        wrote = (
            f"wrote {self.files.cert} and {self.files.key} for {names}, signed by that CA, "
            f"valid until {serving['not_after'][:10]}"
        )
        return [ca, wrote]


def issue(
    out_dir: Path, dns_names: Sequence[str], ips: Sequence[str], days: int, rotate_ca: bool = False
) -> Issued:
    """A serving pair in ``out_dir``, signed by the CA already there unless ``rotate_ca``.

    Half a CA (a certificate without its key, or the reverse) is refused rather than replaced:
    the caller may have moved the key away on purpose, and a silent new CA is what this prevents.
    """
    ca_cert, ca_key = Path(out_dir) / CA_CERT, Path(out_dir) / CA_KEY
    present = [p for p in (ca_cert, ca_key) if p.exists()]
    if not present:
        return Issued(certs.generate(Path(out_dir), dns_names, ips, days), "created")
    if rotate_ca:
        before = _fingerprint(ca_cert)
        files = certs.generate(Path(out_dir), dns_names, ips, days)
        return Issued(files, "replaced", before)
    if len(present) == 1:
        missing = ca_key if present[0] == ca_cert else ca_cert
        raise ValueError(
            f"{present[0]} is there but {missing} is not, so the CA cannot sign: restore it, or give "
            "--rotate-ca to make a new CA (every caBundle made from the old one must then change)"
        )
    try:
        files = certs.generate(Path(out_dir), dns_names, ips, days, ca=(ca_cert, ca_key))
    except ValueError as exc:
        raise ValueError(f"{exc}; --rotate-ca makes a new CA (every caBundle must then change)") from None
    return Issued(files, "kept")


def _fingerprint(ca_cert: Path) -> str | None:
    """The old CA's fingerprint for the report; an unreadable one is being replaced anyway."""
    try:
        return certs.describe(ca_cert)["fingerprint_sha256"][:16]
    except ValueError:
        return None
