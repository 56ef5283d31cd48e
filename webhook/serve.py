"""`tasgate serve`: configuration, start-up, and a draining shutdown.

Every flag has an environment variable (`TASGATE_<FLAG>`), so a Deployment can configure it
either way. With no flags it serves the embedded sample cluster on 127.0.0.1:8443 with fresh
development certificates, and says so.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from webhook import certs
from webhook.audit import line_writer
from webhook.live import WatchSettings, watching
from webhook.podgroups import creating
from webhook.policy import load_policy
from webhook.server import RUNTIME, Settings, StateHolder, create_app
from webhook.sources import cluster_state
from webhook.tls import CertReloader, server_context

log = logging.getLogger("tasgate")
LIVE_STALE_AFTER = 120.0


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    def env(name: str, default: str | None = None) -> str | None:
        return os.environ.get(f"TASGATE_{name}", default)

    parser.add_argument("--host", default=env("HOST", "127.0.0.1"), help="listen address [TASGATE_HOST]")
    parser.add_argument("--port", type=int, default=int(env("PORT", "8443") or 8443), help="[TASGATE_PORT]")
    parser.add_argument(
        "--cert-file", default=env("CERT_FILE"), help="serving certificate PEM [TASGATE_CERT_FILE]"
    )
    parser.add_argument("--key-file", default=env("KEY_FILE"), help="its private key PEM [TASGATE_KEY_FILE]")
    parser.add_argument(
        "--cluster",
        action="append",
        default=_list(env("CLUSTER")),
        help="static cluster dump (file or dir, repeatable); default: the sample cluster "
        "[TASGATE_CLUSTER, comma-separated]",
    )
    parser.add_argument(
        "--kubeconfig",
        default=env("KUBECONFIG_PATH"),
        help="live mode: watch this cluster's API server [TASGATE_KUBECONFIG_PATH]",
    )
    parser.add_argument(
        "--in-cluster",
        action="store_true",
        default=env("IN_CLUSTER", "") in ("1", "true"),
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
        "default 120 live, never static [TASGATE_STALE_AFTER]",
    )
    parser.add_argument(
        "--allow-reference-scorer",
        action="store_true",
        default=env("ALLOW_REFERENCE_SCORER", "") in ("1", "true"),
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
        "--dev-cert-dir",
        default=env("DEV_CERT_DIR"),
        help="where development certificates are written when none are given [TASGATE_DEV_CERT_DIR]",
    )


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    policy = load_policy(args.policy)
    cert, key, note = _certificates(args)
    context = server_context(cert, key)
    live = bool(args.kubeconfig or args.in_cluster)
    holder = StateHolder(source="live" if live else ("static" if args.cluster else "sample"))
    if not live:
        holder.publish(cluster_state(args.cluster))
    stale_after = args.stale_after if args.stale_after >= 0 else (LIVE_STALE_AFTER if live else 0.0)
    settings = Settings(
        policy=policy,
        on_timeout=args.on_timeout,
        stale_after=stale_after,
        allow_reference_scorer=args.allow_reference_scorer,
    )
    reloader = CertReloader(context, cert, key)
    app = create_app(settings, holder, line_writer(sys.stdout), reloader, args.cert_poll_seconds)
    if live:
        app.cleanup_ctx.append(watching(args.kubeconfig, WatchSettings()))
        app.cleanup_ctx.append(creating)
        where = f"the API server of {args.kubeconfig or 'this pod (in-cluster)'}"
    else:
        where = "the embedded sample cluster" if not args.cluster else ", ".join(args.cluster)
    log.info(
        "tasgate serving https://%s:%d on %s with policy %s; %s",
        args.host,
        args.port,
        where,
        policy.name,
        note,
    )
    asyncio.run(_serve(app, Endpoint(args.host, args.port), context, args.drain_seconds))
    return 0


async def _serve(app: web.Application, at: Endpoint, context: object, drain_seconds: float) -> None:
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=30)
    await runner.setup()
    site = web.TCPSite(runner, at.host, at.port, ssl_context=context)  # type: ignore[arg-type]
    await site.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    runtime = app[RUNTIME]
    runtime.draining = True
    log.info("draining: readiness off, %d review(s) in flight", runtime.in_flight)
    await asyncio.sleep(drain_seconds)
    try:
        await asyncio.wait_for(runtime.idle.wait(), 30)
    except TimeoutError:
        log.warning("drain timed out with %d review(s) in flight", runtime.in_flight)
    await runner.cleanup()
    log.info("stopped")


def _certificates(args: argparse.Namespace) -> tuple[Path, Path, str]:
    if args.cert_file and args.key_file:
        return Path(args.cert_file), Path(args.key_file), f"certificate {args.cert_file}"
    if args.cert_file or args.key_file:
        raise SystemExit("tasgate: error: give both --cert-file and --key-file, or neither")
    out = Path(args.dev_cert_dir or tempfile.mkdtemp(prefix="tasgate-dev-certs-"))
    files = certs.generate(out, ["localhost"], [args.host] if _is_ip(args.host) else ["127.0.0.1"])
    return files.cert, files.key, f"development certificates in {out} (CA: {files.ca_cert})"


def _is_ip(host: str) -> bool:
    import ipaddress  # noqa: PLC0415 - only for this check

    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _list(raw: str | None) -> list[str] | None:
    return [p for p in raw.split(",") if p] if raw else None
