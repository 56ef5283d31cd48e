"""`tasgate serve`'s flags and their environment variables, and what start-up makes of them.

The mapping is checked where it ends: the ``Settings``, ``StateSource`` and ``CertReloader`` the
app would be created with (``create_app`` is stopped before anything listens).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from webhook.live.leader import Campaign
from webhook.serve import main
from webhook.serve.flags import add_arguments
from webhook.serve.keys import Election, Settings, StateSource
from webhook.serve.tls import CertReloader

ENV = (
    "LEADER_ELECT", "LEASE_NAME", "LEASE_NAMESPACE", "TEST_FAULT_HOOK", "CLIENT_CA_FILE", "IN_CLUSTER",
    "STATE", "CLUSTER", "KUBECONFIG_PATH", "LIVE",
)  # fmt: skip


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(f"TASGATE_{name}", raising=False)
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tasgate serve")
    add_arguments(parser)
    return parser.parse_args(argv)


def test_defaults() -> None:
    args = parse()
    assert args.leader_elect is True and args.test_fault_hook is False and args.client_ca_file is None
    assert (args.lease_name, args.lease_namespace) == (Campaign.lease_name, Campaign.lease_namespace)
    assert (args.lease_name, args.lease_namespace) == ("tasgate", "tasgate-system")


def test_leader_election_switches_by_flag_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse("--no-leader-elect").leader_elect is False
    monkeypatch.setenv("TASGATE_LEADER_ELECT", "False")
    assert parse().leader_elect is False
    assert parse("--leader-elect").leader_elect is True, "a flag wins over the environment"
    monkeypatch.setenv("TASGATE_LEADER_ELECT", "1")
    assert parse().leader_elect is True


def test_an_unreadable_switch_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TASGATE_LEADER_ELECT", "maybe")
    with pytest.raises(SystemExit) as exited:
        parse()
    assert exited.value.code == 2
    assert "TASGATE_LEADER_ELECT='maybe'" in capsys.readouterr().err


def test_the_lease_lives_in_the_pods_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "ml-platform")
    assert parse().lease_namespace == "ml-platform"
    monkeypatch.setenv("TASGATE_LEASE_NAMESPACE", "leases")
    assert parse().lease_namespace == "leases"
    assert parse("--lease-namespace", "other").lease_namespace == "other"
    monkeypatch.setenv("TASGATE_LEASE_NAME", "gate")
    assert parse().lease_name == "gate"


def test_the_fault_hook_is_hidden_and_off(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert parse("--test-fault-hook").test_fault_hook is True
    monkeypatch.setenv("TASGATE_TEST_FAULT_HOOK", "true")
    assert parse().test_fault_hook is True
    with pytest.raises(SystemExit):
        parse("--help")
    shown = capsys.readouterr().out
    assert "--leader-elect" in shown and "--client-ca-file" in shown and "--test-fault-hook" not in shown


class CreatedError(Exception):
    """Raised in place of ``create_app``: start-up got as far as building the app."""


def started(monkeypatch: pytest.MonkeyPatch, args: argparse.Namespace) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def create_app(settings: Settings, audit: Any, source: StateSource, reloader: CertReloader) -> None:
        seen.update(settings=settings, source=source, reloader=reloader)
        raise CreatedError

    monkeypatch.setattr(main, "create_app", create_app)
    with pytest.raises(CreatedError):
        main.run(args)
    return seen


def test_live_mode_gets_the_election_and_the_settings_the_hook(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    argv = ["--kubeconfig", str(kubeconfig), "--no-leader-elect", "--lease-name", "gate"]
    seen = started(monkeypatch, parse(*argv, "--lease-namespace", "ml", "--test-fault-hook"))
    assert seen["source"].live and seen["source"].kubeconfig == str(kubeconfig)
    assert seen["source"].election == Election(False, Campaign(lease_name="gate", lease_namespace="ml"))
    assert seen["settings"].fault_hook is True
    assert seen["reloader"].client_ca is None

    seen = started(monkeypatch, parse("--kubeconfig", str(kubeconfig)))
    assert seen["source"].election == Election()
    assert seen["settings"].fault_hook is False


def test_the_client_ca_reaches_the_tls_context(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from webhook.serve.certs import generate  # noqa: PLC0415

    ca = generate(tmp_path / "callers", ["localhost"]).ca_cert
    seen = started(monkeypatch, parse("--client-ca-file", str(ca)))
    reloader: CertReloader = seen["reloader"]
    assert reloader.client_ca == ca and reloader.loaded
    assert reloader.context.verify_mode.name == "CERT_REQUIRED"


def test_a_missing_client_ca_stops_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(main, "create_app", lambda *_: pytest.fail("started without its client CA"))
    assert main.run(parse("--client-ca-file", str(tmp_path / "absent.crt"))) == 2
    assert f"TLS client CA file {tmp_path / 'absent.crt'} does not exist" in capsys.readouterr().err


# --- the state flag's name, and live mode only when asked ----------------------------------------


def test_state_is_the_flag_and_cluster_its_alias(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse("--state", "a.yaml", "--cluster", "b.yaml").cluster == ["a.yaml", "b.yaml"]
    monkeypatch.setenv("TASGATE_CLUSTER", "old.yaml")
    assert parse().cluster == ["old.yaml"], "the old variable still works"
    monkeypatch.setenv("TASGATE_STATE", "x.yaml,y.yaml")
    assert parse().cluster == ["x.yaml", "y.yaml"], "the new one wins"


def kubeconfig(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\n")
    return path


def test_kubeconfig_in_the_environment_never_switches_to_live_mode(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An admin's shell has $KUBECONFIG set: `make run` (no flags) still serves the sample."""
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "kubeconfig")))
    args = parse()
    assert (args.kubeconfig, args.live, args.in_cluster) == (None, False, False)
    seen = started(monkeypatch, args)
    assert not seen["source"].live and seen["source"].label == "sample"


def test_live_takes_the_first_kubeconfig_file_that_exists(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    there = kubeconfig(tmp_path / "there")
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{there}")
    assert parse("--live").kubeconfig == str(there)
    given = str(kubeconfig(tmp_path / "given"))
    assert parse("--live", "--kubeconfig", given).kubeconfig == given, "--kubeconfig wins, after --live"
    assert parse("--kubeconfig", given, "--live").kubeconfig == given, "and before it"
    seen = started(monkeypatch, parse("--live"))
    assert seen["source"].live and seen["source"].kubeconfig == str(there)
    monkeypatch.setenv("TASGATE_LIVE", "true")
    assert parse().kubeconfig == str(there)


def test_live_without_kubeconfig_reads_the_home_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert parse("--live").kubeconfig == str(tmp_path / ".kube" / "config")
    assert main.run(parse("--live")) == 2
    assert f"{tmp_path / '.kube' / 'config'}: no such file" in capsys.readouterr().err
    kubeconfig(tmp_path / ".kube" / "config")
    assert parse("--live").kubeconfig == str(tmp_path / ".kube" / "config")
