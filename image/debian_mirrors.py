"""The Debian mirrors for the image's base layer, read from the build machine's own apt sources.

Usage: python3 image/debian_mirrors.py SUITE [APT_DIR] [OS_RELEASE]

Prints mmdebstrap's three mirror lines for SUITE: the archive (SUITE, SUITE-updates) and the
security archive (SUITE-security). The repository names no mirror: a build machine already knows
where it may fetch Debian from (a local mirror, a proxy, the public one), and the image is built
from the same place. APT_DIR (default /etc/apt) is read as apt reads it: ``sources.list`` (one-line
format), then ``sources.list.d/*.list`` and ``*.sources`` (deb822) in name order; entries with
``Enabled: no`` and files apt ignores (``*.disabled``, ``*.save``, …) are skipped.

An entry is Debian's archive when it serves component ``main`` for the release of a Debian machine
(``VERSION_CODENAME`` in os-release) or for
SUITE (``<name>``, ``<name>-updates``; the security archive: ``<name>-security``, or the old
``<name>/updates``) and is not signed by a keyring other than ``debian-archive-keyring``: a
third-party archive that names a release (``deb [signed-by=…vendor.gpg] https://… bookworm main``)
carries its vendor's key. Only http, https and file URIs are taken. Nothing found is an error
(exit 1) naming what is missing: there is no fallback host.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

SCHEMES = ("http://", "https://", "file:/")
DEBIAN_KEYRING = "debian-archive-keyring"


@dataclass(frozen=True)
class Entry:
    uris: tuple[str, ...]
    suites: tuple[str, ...]
    components: tuple[str, ...]
    signed_by: str
    where: str


def one_line_entries(text: str, where: str) -> list[Entry]:
    """``deb [opt=value …] URI SUITE COMPONENT…`` lines; deb-src and comments skipped."""
    entries = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        found = re.fullmatch(r"deb\s+(?:\[(?P<options>[^\]]*)\]\s+)?(?P<rest>.+)", line)
        if found is None:
            continue
        options = dict(o.split("=", 1) for o in (found["options"] or "").split() if "=" in o)
        words = found["rest"].split()
        if len(words) < 3:
            continue
        signed_by = {k.lower(): v for k, v in options.items()}.get("signed-by", "")
        entries.append(Entry((words[0],), (words[1],), tuple(words[2:]), signed_by, f"{where}:{number}"))
    return entries


def deb822_entries(text: str, where: str) -> list[Entry]:
    """Stanzas of ``Types``/``URIs``/``Suites``/``Components``/``Signed-By``/``Enabled`` fields."""
    entries = []
    for number, stanza in enumerate(re.split(r"\n\s*\n", text), 1):
        fields: dict[str, str] = {}
        key = ""
        for raw in stanza.splitlines():
            if raw.startswith("#") or not raw.strip():
                continue
            if raw[0].isspace() and key:  # a continuation line (an inline Signed-By key, say)
                fields[key] += "\n" + raw.strip()
                continue
            key, _, value = raw.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
            continue
        entries.append(
            Entry(
                tuple(fields.get("uris", "").split()),
                tuple(fields.get("suites", "").split()),
                tuple(fields.get("components", "").split()),
                fields.get("signed-by", ""),
                f"{where} (stanza {number})",
            )
        )
    return entries


def apt_entries(apt_dir: Path) -> list[Entry]:
    entries = []
    main = apt_dir / "sources.list"
    if main.is_file():
        entries += one_line_entries(main.read_text(), str(main))
    parts = apt_dir / "sources.list.d"
    for path in sorted(parts.iterdir()) if parts.is_dir() else []:
        if path.suffix == ".list":
            entries += one_line_entries(path.read_text(), str(path))
        elif path.suffix == ".sources":
            entries += deb822_entries(path.read_text(), str(path))
    return entries


def codename(os_release: Path) -> str | None:
    """The machine's Debian release name; None on any other distribution (its archive is not Debian's)."""
    try:
        lines = os_release.read_text().splitlines()
    except OSError:
        return None
    fields = {k: v.strip().strip('"') for k, _, v in (line.partition("=") for line in lines)}
    if fields.get("ID") != "debian":
        return None
    return fields.get("VERSION_CODENAME") or None


def find(entries: list[Entry], suites: set[str]) -> tuple[str, str] | None:
    """(URI, where it was read) of the first Debian entry serving ``main`` of one of ``suites``."""
    for entry in entries:
        keyring = entry.signed_by.strip()
        if keyring and DEBIAN_KEYRING not in keyring:
            continue
        if "main" not in entry.components or not suites & set(entry.suites):
            continue
        for uri in entry.uris:
            if uri.startswith(SCHEMES):
                return uri.rstrip("/"), entry.where
    return None


def mirrors(suite: str, apt_dir: Path, os_release: Path) -> list[str]:
    names = {suite} | ({own} if (own := codename(os_release)) else set())
    entries = apt_entries(apt_dir)
    archive = find(entries, names | {f"{n}-updates" for n in names})
    security = find(entries, {f"{n}-security" for n in names} | {f"{n}/updates" for n in names})
    found = {"archive": archive, "security archive": security}
    missing = [what for what, hit in found.items() if hit is None]
    if archive is None or security is None:
        wanted = ", ".join(sorted(names))
        raise SystemExit(
            f"debian_mirrors.py: error: no Debian {' and no Debian '.join(missing)} for {wanted} in "
            f"the apt sources of this machine ({apt_dir}/sources.list, {apt_dir}/sources.list.d/*.list "
            f"and *.sources; {len(entries)} deb entries read): add the mirror this machine may use"
        )
    for what, (uri, where) in (("archive", archive), ("security archive", security)):
        print(f"debian_mirrors.py: Debian {what} {uri} (from {where})", file=sys.stderr)
    return [
        f"deb {archive[0]} {suite} main",
        f"deb {archive[0]} {suite}-updates main",
        f"deb {security[0]} {suite}-security main",
    ]


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 3:
        print((__doc__ or "").split("\n\n")[1], file=sys.stderr)
        return 2
    apt_dir = Path(argv[1] if len(argv) > 1 else "/etc/apt")
    os_release = Path(argv[2] if len(argv) > 2 else "/etc/os-release")
    print("\n".join(mirrors(argv[0], apt_dir, os_release)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
