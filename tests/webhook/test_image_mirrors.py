"""image/debian_mirrors.py: the image's Debian mirrors come from the build machine's apt sources.

Run as build.sh runs it (a script, on fixture apt directories), since the repository names no
mirror and must fail loudly rather than fall back to one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "image" / "debian_mirrors.py"
DEB822 = """\
Types: deb
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def run(apt: Path, suite: str = "bookworm", codename: str = "bookworm") -> subprocess.CompletedProcess[str]:
    os_release = apt / "os-release"
    os_release.write_text(f'NAME="Debian GNU/Linux"\nID=debian\nVERSION_CODENAME={codename}\n')
    argv = [sys.executable, str(SCRIPT), suite, str(apt), str(os_release)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


@pytest.fixture
def apt(tmp_path: Path) -> Path:
    (tmp_path / "sources.list.d").mkdir()
    return tmp_path


def test_deb822_sources_give_archive_updates_and_security(apt: Path) -> None:
    (apt / "sources.list.d" / "debian.sources").write_text(DEB822)
    done = run(apt)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "deb http://mirror.example/debian bookworm main",
        "deb http://mirror.example/debian bookworm-updates main",
        "deb http://mirror.example/debian-security bookworm-security main",
    ]
    assert "debian.sources (stanza 1)" in done.stderr, "says where each mirror was read"


def test_one_line_sources_and_third_party_archives(apt: Path) -> None:
    (apt / "sources.list").write_text(
        "# a vendor's archive that names the release and main, signed by its own key\n"
        "deb [arch=amd64 signed-by=/usr/share/keyrings/vendor.gpg] https://apt.vendor.example bookworm main\n"
        "deb-src http://src.example/debian bookworm main\n"
        "deb cdrom:[Debian]/ bookworm main\n"
        "deb https://proxy.example/debian/ bookworm main contrib  # trailing comment\n"
        "deb http://proxy.example/security bookworm-security main\n"
    )
    (apt / "sources.list.d" / "node.sources").write_text(
        "Types: deb\nURIs: https://node.example\nSuites: nodistro\nComponents: main\n"
    )
    done = run(apt)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "deb https://proxy.example/debian bookworm main"
    assert done.stdout.splitlines()[2] == "deb http://proxy.example/security bookworm-security main"


def test_disabled_entries_and_ignored_files_are_skipped(apt: Path) -> None:
    (apt / "sources.list.d" / "debian.sources").write_text(
        DEB822.replace("Types: deb\n", "Types: deb\nEnabled: no\n", 1)
    )
    (apt / "sources.list.d" / "old.list.disabled").write_text("deb http://old.example/debian bookworm main\n")
    (apt / "sources.list.d" / "other.list").write_text(
        "deb http://other.example/debian bookworm-updates main\n"
    )
    done = run(apt)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "deb http://other.example/debian bookworm main"


def test_the_machines_own_release_names_the_mirror_for_another_suite(apt: Path) -> None:
    (apt / "sources.list.d" / "debian.sources").write_text(DEB822.replace("bookworm", "trixie"))
    done = run(apt, suite="bookworm", codename="trixie")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "deb http://mirror.example/debian bookworm main"
    (apt / "os-release").write_text("ID=ubuntu\nVERSION_CODENAME=trixie\n")  # not Debian: not its archive
    argv = [sys.executable, str(SCRIPT), "bookworm", str(apt), str(apt / "os-release")]
    other = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert other.returncode == 1 and "no Debian archive" in other.stderr


@pytest.mark.parametrize(
    ("sources", "missing"),
    [
        ("", "no Debian archive and no Debian security archive"),
        ("deb http://mirror.example/debian bookworm main\n", "no Debian security archive"),
        ("deb http://mirror.example/debian-security bookworm-security main\n", "no Debian archive "),
    ],
)
def test_no_mirror_is_a_loud_failure(apt: Path, sources: str, missing: str) -> None:
    (apt / "sources.list").write_text(sources)
    done = run(apt)
    assert done.returncode == 1 and done.stdout == ""
    assert missing in done.stderr and str(apt) in done.stderr


def test_build_sh_prints_this_machines_mirrors_without_root() -> None:
    done = subprocess.run(
        ["bash", str(ROOT / "image" / "build.sh"), "--print-mirrors"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:  # a machine with no Debian mirror in its apt sources: said so, loudly
        assert done.returncode == 1 and "no Debian" in done.stderr and "apt sources" in done.stderr
        return
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and all(line.startswith("deb ") for line in lines), lines
