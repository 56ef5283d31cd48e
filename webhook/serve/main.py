"""`tasgate serve`: start-up and a draining shutdown (the flags are in ``serve.flags``).

With no flags it serves the embedded sample cluster on 127.0.0.1:8443 with fresh development
certificates, and says so.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from webhook.files.policy import load_policy
from webhook.files.sources import cluster_objects
from webhook.serve import certs
from webhook.serve.app import create_app
from webhook.serve.audit import line_writer
from webhook.serve.keys import RUNTIME, Settings, StateSource
from webhook.serve.tls import CertReloader, server_context

log = logging.getLogger("tasgate")
LIVE_STALE_AFTER = 120.0


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    policy = load_policy(args.policy)
    cert, key, note = _certificates(args)
    context = server_context(cert, key)
    live = bool(args.kubeconfig or args.in_cluster)
    if live:
        source = StateSource(live=True, kubeconfig=args.kubeconfig)
        where = f"the API server of {args.kubeconfig or 'this pod (in-cluster)'}"
    else:
        label = "static" if args.cluster else "sample"
        source = StateSource(objects=cluster_objects(args.cluster), label=label)
        where = "the embedded sample cluster" if not args.cluster else ", ".join(args.cluster)
    stale_after = args.stale_after if args.stale_after >= 0 else (LIVE_STALE_AFTER if live else 0.0)
    settings = Settings(
        policy=policy,
        on_timeout=args.on_timeout,
        stale_after=stale_after,
        allow_reference_scorer=args.allow_reference_scorer,
        cert_poll_seconds=args.cert_poll_seconds,
    )
    reloader = CertReloader(context, cert, key)
    app = create_app(settings, line_writer(sys.stdout), source, reloader)
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
