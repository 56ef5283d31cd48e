"""hack/ensure-promtool.sh installs promtool and prometheus without leaving a Prometheus running.

Debian's `prometheus` package (the only one with promtool) enables and starts prometheus.service
from its postinst; on a systemd host `make test` then left a server on :9090. The script must
install with every service start denied (a policy-rc.d, the hook invoke-rc.d and
deb-systemd-invoke ask first) and disable the service afterwards. Run here against fakes of
apt-get and the service tools, on a host root of the test's own (``TASGATE_HOST_ROOT``), so
nothing on the real host is touched; the fake apt-get asks the policy as the package's postinst
would and "starts" the service only if it is allowed to.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "ensure-promtool.sh"

FAKE_APT_GET = """#!/bin/sh
# apt-get install ... prometheus: what the package's postinst does, as deb-systemd-invoke does it.
echo "apt-get $*" >> "$LOG"
case "$*" in *install*prometheus*) ;; *) exit 0 ;; esac
for tool in promtool prometheus; do printf '#!/bin/sh\\n' > "$BIN/$tool"; chmod 755 "$BIN/$tool"; done
echo enabled > "$HOST/service-enabled"
policy="$HOST/usr/sbin/policy-rc.d"
if [ -x "$policy" ]; then "$policy" prometheus.service start; code=$?; else code=0; fi
if [ "$code" = 101 ]; then echo "start denied" >> "$LOG"; else echo running > "$HOST/service-running"; fi
"""
FAKE_SERVICE_TOOL = """#!/bin/sh
echo "$(basename "$0") $*" >> "$LOG"
case "$*" in *disable*) rm -f "$HOST/service-enabled" ;; esac
case "$*" in *--now*|*stop*) rm -f "$HOST/service-running" ;; esac
"""


def executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def run(tmp_path: Path, *, systemd: bool, host_policy: str | None = None) -> tuple[Path, str]:
    """The script as root (a fake `id`), with no promtool on PATH; the host root, and the log."""
    host, bin_dir = tmp_path / "host", tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "sh", "chmod", "tee", "rm", "basename", "cat", "printf"):
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    executable(bin_dir / "id", "#!/bin/sh\necho 0\n")
    executable(bin_dir / "apt-get", FAKE_APT_GET)
    for tool in ("systemctl", "update-rc.d"):
        executable(bin_dir / tool, FAKE_SERVICE_TOOL)
    (host / "usr" / "sbin").mkdir(parents=True)
    if systemd:
        (host / "run" / "systemd" / "system").mkdir(parents=True)
    if host_policy is not None:
        executable(host / "usr" / "sbin" / "policy-rc.d", host_policy)
    log = tmp_path / "calls.log"
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "TASGATE_HOST_ROOT": str(host),
           "LOG": str(log), "BIN": str(bin_dir), "HOST": str(host)}  # fmt: skip
    done = subprocess.run(
        [str(bin_dir / "bash"), str(SCRIPT)], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return host, log.read_text()


@pytest.mark.parametrize("systemd", [True, False])
def test_the_install_starts_no_service_and_leaves_it_disabled(tmp_path: Path, systemd: bool) -> None:
    host, calls = run(tmp_path, systemd=systemd)
    assert "start denied" in calls, calls
    assert not (host / "service-running").exists(), "a Prometheus left running"
    assert not (host / "service-enabled").exists(), "enabled for the next boot"
    host_root = f"--root={host}"
    disable = "systemctl disable --now" if systemd else f"systemctl {host_root} disable"
    assert disable in calls, calls
    assert not (host / "usr" / "sbin" / "policy-rc.d").exists(), "the temporary policy is removed"


def test_a_hosts_own_policy_is_kept_and_a_service_it_let_start_is_stopped(tmp_path: Path) -> None:
    allow = "#!/bin/sh\n# the host's own\nexit 0\n"
    host, calls = run(tmp_path, systemd=True, host_policy=allow)
    assert "start denied" not in calls
    assert (host / "usr" / "sbin" / "policy-rc.d").read_text() == allow
    assert not (host / "service-running").exists() and not (host / "service-enabled").exists()


def test_nothing_is_installed_when_the_tools_are_there(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    for tool in ("promtool", "prometheus"):
        executable(bin_dir / tool, "#!/bin/sh\n")
    bash = shutil.which("bash")
    assert bash
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TASGATE_HOST_ROOT": str(tmp_path)}
    done = subprocess.run([bash, str(SCRIPT)], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stderr == ""
