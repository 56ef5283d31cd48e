"""`tasgate serve`'s flags: every one has an environment variable (`TASGATE_<FLAG>`), so a
Deployment can configure it either way."""

from __future__ import annotations

import argparse
import os
from typing import Any

from webhook.files.kubeconfig import default_kubeconfig, first_existing
from webhook.live.leader import Campaign

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    def env(name: str, default: str | None = None) -> str | None:
        return os.environ.get(f"TASGATE_{name}", default)

    def switch(name: str, default: bool) -> bool:
        return _switch(parser, f"TASGATE_{name}", env(name), default)

    parser.add_argument("--host", default=env("HOST", "127.0.0.1"), help="listen address [TASGATE_HOST]")
    parser.add_argument("--port", type=int, default=int(env("PORT", "8443") or 8443), help="[TASGATE_PORT]")
    parser.add_argument(
        "--cert-file", default=env("CERT_FILE"), help="serving certificate PEM [TASGATE_CERT_FILE]"
    )
    parser.add_argument("--key-file", default=env("KEY_FILE"), help="its private key PEM [TASGATE_KEY_FILE]")
    parser.add_argument(
        "--client-ca-file",
        default=env("CLIENT_CA_FILE"),
        help="require every caller on the webhook port to present a client certificate signed by a "
        "CA in this PEM file (reloaded when it changes); default: any caller [TASGATE_CLIENT_CA_FILE]",
    )
    parser.add_argument(
        "--state",
        "--cluster",
        dest="cluster",
        action="append",
        metavar="FILE|DIR",
        default=_list(env("STATE") or env("CLUSTER")),
        help="static cluster state, as `tasgate check --state` reads it (file or dir, repeatable; "
        "--cluster is an alias); default: the sample cluster [TASGATE_STATE or TASGATE_CLUSTER, "
        "comma-separated]",
    )
    parser.add_argument(
        "--kubeconfig",
        metavar="PATH",
        default=env("KUBECONFIG_PATH") or (_live_kubeconfig() if switch("LIVE", False) else None),
        help="live mode: watch the API server of this kubeconfig [TASGATE_KUBECONFIG_PATH]",
    )
    parser.add_argument(
        "--live",
        action=_Live,
        help="live mode on the kubeconfig kubectl reads: the first file of $KUBECONFIG that exists, "
        "else ~/.kube/config; $KUBECONFIG alone never leaves the sample [TASGATE_LIVE]",
    )
    parser.add_argument(
        "--in-cluster",
        action="store_true",
        default=switch("IN_CLUSTER", False),
        help="live mode with the pod's service account [TASGATE_IN_CLUSTER]",
    )
    parser.add_argument(
        "--policy", default=env("POLICY", "default"), help="policy file, default or none [TASGATE_POLICY]"
    )
    parser.add_argument(
        "--on-timeout",
        choices=("allow", "deny"),
        default=env("ON_TIMEOUT", "allow"),
        help="answer when a decision cannot be made in time or the state is stale [TASGATE_ON_TIMEOUT]",
    )
    parser.add_argument(
        "--stale-after",
        type=float,
        default=float(env("STALE_AFTER", "-1") or -1),
        help="seconds until the cluster state counts as stale; 0 = never; "
        "default: 120 live, never static [TASGATE_STALE_AFTER]",
    )
    parser.add_argument(
        "--allow-reference-scorer",
        action="store_true",
        default=switch("ALLOW_REFERENCE_SCORER", False),
        help="report ready even on the pure-Python scorer [TASGATE_ALLOW_REFERENCE_SCORER]",
    )
    parser.add_argument(
        "--cert-poll-seconds",
        type=float,
        default=float(env("CERT_POLL_SECONDS", "10") or 10),
        help="how often certificate files are checked for rotation [TASGATE_CERT_POLL_SECONDS]",
    )
    parser.add_argument(
        "--drain-seconds",
        type=float,
        default=float(env("DRAIN_SECONDS", "0") or 0),
        help="after SIGTERM, how long to stay up unready before closing [TASGATE_DRAIN_SECONDS]",
    )
    parser.add_argument(
        "--grace-seconds",
        type=float,
        default=float(env("GRACE_SECONDS", "10") or 10),
        help="after the drain, how long in-flight reviews may still take before they are cut "
        "[TASGATE_GRACE_SECONDS]",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=int(env("METRICS_PORT", "9090") or 9090),
        help="plain-HTTP port for /metrics (and /healthz, /readyz); 0 = none [TASGATE_METRICS_PORT]",
    )
    parser.add_argument(
        "--metrics-host",
        default=env("METRICS_HOST"),
        help="listen address of the metrics port; default: --host [TASGATE_METRICS_HOST]",
    )
    parser.add_argument(
        "--pod-info-metrics",
        action=argparse.BooleanOptionalAction,
        default=switch("POD_INFO_METRICS", False),
        help="export tasgate_pod_info{namespace,pod,gang,<level>}, one series per running pod of a "
        "tracked gang, to join GPU exporters' per-pod series (live mode) [TASGATE_POD_INFO_METRICS]",
    )
    parser.add_argument(
        "--decision-processes",
        type=int,
        default=int(env("DECISION_PROCESSES", "0") or 0),
        help="decide reviews in this many worker processes, each with its own copy of the cluster "
        "state (its own watches in live mode): decisions per second scale with cores, memory and "
        "watches grow by one state each; 0 = on the server's threads [TASGATE_DECISION_PROCESSES]",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=int(env("MAX_CONNECTIONS", "1024") or 1024),
        help="open connections accepted on the webhook port; more are closed [TASGATE_MAX_CONNECTIONS]",
    )
    parser.add_argument(
        "--read-timeout",
        type=float,
        default=float(env("READ_TIMEOUT", "10") or 10),
        help="seconds a client has for the TLS handshake, a request head, and again its body; "
        "also the keep-alive idle limit [TASGATE_READ_TIMEOUT]",
    )
    parser.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=switch("LEADER_ELECT", True),
        help="live mode: only the holder of a Lease writes (PodGroups, Events); every replica "
        "still answers reviews. Off (--no-leader-elect) only where one replica runs, e.g. outside "
        "a cluster [TASGATE_LEADER_ELECT]",
    )
    parser.add_argument(
        "--lease-name", default=env("LEASE_NAME", Campaign.lease_name), help="[TASGATE_LEASE_NAME]"
    )
    parser.add_argument(
        "--lease-namespace",
        default=env("LEASE_NAMESPACE") or os.environ.get("POD_NAMESPACE") or Campaign.lease_namespace,
        help=f"where the Lease is; it must exist, or no replica writes (said once in the log and on "
        f"/readyz). Default: $POD_NAMESPACE, else {Campaign.lease_namespace} [TASGATE_LEASE_NAMESPACE]",
    )
    parser.add_argument(
        "--multikueue-workers",
        action=argparse.BooleanOptionalAction,
        default=switch("MULTIKUEUE_WORKERS", False),
        help="live mode on a MultiKueue manager: also watch each worker cluster, reached as Kueue "
        "reaches it (MultiKueueCluster objects, their kubeconfig Secrets in --kueue-namespace; "
        "RBAC: docs/live.md#multikueue), and judge MultiKueue gangs there [TASGATE_MULTIKUEUE_WORKERS]",
    )
    parser.add_argument(
        "--kueue-namespace",
        default=env("KUEUE_NAMESPACE", "kueue-system"),
        help="the namespace Kueue runs in, where MultiKueue's kubeconfig Secrets are "
        "[TASGATE_KUEUE_NAMESPACE]",
    )
    parser.add_argument(  # the fault suite makes background tasks raise through it; never in production
        "--test-fault-hook",
        action="store_true",
        default=switch("TEST_FAULT_HOOK", False),
        help=argparse.SUPPRESS,
    )
    parser.add_argument(
        "--dev-cert-dir",
        default=env("DEV_CERT_DIR"),
        help="where development certificates are written when none are given [TASGATE_DEV_CERT_DIR]",
    )


class _Live(argparse.Action):
    """``--live``: live mode on kubectl's kubeconfig, unless ``--kubeconfig`` names one (before or
    after it). Only when asked: with ``$KUBECONFIG`` merely set, as on any admin's shell, `make run`
    still serves the sample. A file that is not there is start-up's "no such file"."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=False, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, True)
        if not namespace.kubeconfig:  # a --kubeconfig given later overwrites it
            namespace.kubeconfig = _live_kubeconfig()


def _live_kubeconfig() -> str:
    """One file: the server's start-up takes one (the CLI merges a list as kubectl does)."""
    return first_existing(default_kubeconfig())


def _switch(parser: argparse.ArgumentParser, variable: str, raw: str | None, default: bool) -> bool:
    """An environment switch; a value that is neither true nor false is a usage error, not a guess."""
    if raw is None or not raw.strip():
        return default
    if raw.strip().lower() in _TRUE:
        return True
    if raw.strip().lower() in _FALSE:
        return False
    parser.error(f"{variable}={raw!r}: want one of {', '.join(_TRUE + _FALSE)}")


def _list(raw: str | None) -> list[str] | None:
    return [p for p in raw.split(",") if p] if raw else None
