"""`tasgate serve`: start-up and a draining shutdown (the flags are in ``serve.flags``).

With no flags it serves the embedded sample cluster on 127.0.0.1:8443 with fresh development
certificates, and says so.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import shutil
import signal
import ssl
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from webhook.files.policy import load_policy
from webhook.files.sources import cluster_objects
from webhook.live import heap
from webhook.live.leader import Campaign
from webhook.serve import certs, listen
from webhook.serve.app import create_app, create_metrics_app
from webhook.serve.audit import line_writer
from webhook.serve.keys import RUNTIME, Election, Settings, StateSource
from webhook.serve.tls import CertReloader, TLSConfigError, server_context

log = logging.getLogger("tasgate")
LIVE_STALE_AFTER = 120.0


@dataclass(frozen=True)
class Endpoint:
    """Where and how `tasgate serve` listens, and how it shuts down."""

    host: str
    port: int
    metrics_port: int = 0  # 0: no metrics listener
    metrics_host: str | None = None  # default: host
    max_connections: int = 1024
    read_timeout: float = 10.0
    drain_seconds: float = 0.0
    grace_seconds: float = 10.0


class StartError(Exception):
    """`tasgate serve` cannot start; the message says why, in one line."""


CUT_SECONDS = 1.0  # after the grace: how long aiohttp waits for handlers it then cancels
METRICS_CONNECTIONS = 64


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    scratch: list[Path] = []
    try:
        return _run(args, scratch)
    except (StartError, TLSConfigError) as exc:
        print(f"tasgate: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tasgate: interrupted", file=sys.stderr)
        return 130
    finally:
        for path in scratch:
            shutil.rmtree(path, ignore_errors=True)


def _run(args: argparse.Namespace, scratch: list[Path]) -> int:
    if args.kubeconfig and not Path(args.kubeconfig).is_file():
        raise StartError(f"--kubeconfig {args.kubeconfig}: no such file")
    if args.multikueue_workers and not (args.kubeconfig or args.in_cluster):
        raise StartError(
            "--multikueue-workers watches worker clusters in live mode: give --kubeconfig, "
            "--live or --in-cluster"
        )
    policy = load_policy(args.policy)
    cert, key, note = _certificates(args, scratch)
    client_ca = Path(args.client_ca_file) if args.client_ca_file else None
    context = server_context(cert, key, client_ca)
    if client_ca is not None:
        note += f"; callers must present a client certificate from {client_ca}"
    live = bool(args.kubeconfig or args.in_cluster)
    if live:
        election = Election(
            enabled=args.leader_elect,
            campaign=Campaign(lease_name=args.lease_name, lease_namespace=args.lease_namespace),
        )
        workers = args.kueue_namespace if args.multikueue_workers else None
        source = StateSource(
            live=True, kubeconfig=args.kubeconfig, election=election, multikueue_namespace=workers
        )
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
        read_timeout=args.read_timeout,
        policy_file=args.policy if args.policy not in ("default", "none") else None,
        fault_hook=args.test_fault_hook,
        pod_info_metrics=args.pod_info_metrics,
        decision_processes=max(args.decision_processes, 0),
    )
    reloader = CertReloader(context, cert, key, client_ca)
    app = create_app(settings, line_writer(sys.stdout), source, reloader)
    at = Endpoint(
        args.host,
        args.port,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
        max_connections=args.max_connections,
        read_timeout=args.read_timeout,
        drain_seconds=args.drain_seconds,
        grace_seconds=args.grace_seconds,
    )
    metrics = f", metrics http://{at.metrics_host or at.host}:{at.metrics_port}" if at.metrics_port else ""
    log.info(
        "tasgate serving https://%s:%d%s on %s with policy %s; %s",
        args.host,
        args.port,
        metrics,
        where,
        policy.name,
        note,
    )
    heap.settle()  # modules and the static state live as long as the process
    heap.share_the_gil()
    asyncio.run(_serve(app, at, context))
    return 0


async def _serve(app: web.Application, at: Endpoint, context: ssl.SSLContext) -> None:
    """Serve until SIGTERM/SIGINT, then drain: at most drain + grace + CUT_SECONDS to exit."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runners: list[web.AppRunner] = []
    try:
        main = listen.runner(app, at.read_timeout, CUT_SECONDS)
        runners.append(main)
        await main.setup()
        site = listen.GuardedSite(
            main,
            at.host,
            at.port,
            ssl_context=context,
            max_connections=at.max_connections,
            handshake_timeout=at.read_timeout,
        )
        await site.start()
        if at.metrics_port:
            side = listen.runner(create_metrics_app(app), at.read_timeout, CUT_SECONDS)
            runners.append(side)
            await side.setup()
            host = at.metrics_host or at.host
            await listen.GuardedSite(side, host, at.metrics_port, max_connections=METRICS_CONNECTIONS).start()
    except Exception as exc:
        log.debug("start-up failed", exc_info=True)
        for runner in reversed(runners):
            with contextlib.suppress(Exception):
                await runner.cleanup()
        raise StartError(f"cannot start: {_one_line(exc)}") from None
    await stop.wait()
    runtime = app[RUNTIME]
    runtime.draining = True
    log.info("draining: readiness off, %d review(s) in flight", runtime.in_flight)
    await asyncio.sleep(at.drain_seconds)
    await site.stop()  # no new connections; open ones close once their current request is answered
    if main.server is not None:
        main.server.pre_shutdown()
    try:
        await asyncio.wait_for(runtime.idle.wait(), at.grace_seconds)
    except TimeoutError:
        log.warning(
            "drain: %d review(s) still in flight after %.0fs; cutting", runtime.in_flight, at.grace_seconds
        )
    for runner in reversed(runners):
        await runner.cleanup()
    log.info("stopped")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _certificates(args: argparse.Namespace, scratch: list[Path]) -> tuple[Path, Path, str]:
    """The serving pair: given files, or development certificates.

    Without --dev-cert-dir they go to a private temp dir that is removed at exit, and the CA
    key is deleted as soon as the serving certificate is signed (nothing else is ever signed
    with it), so no CA key outlives the start-up.
    """
    if args.cert_file and args.key_file:
        return Path(args.cert_file), Path(args.key_file), f"certificate {args.cert_file}"
    if args.cert_file or args.key_file:
        raise StartError("give both --cert-file and --key-file, or neither")
    ips = [args.host] if _is_ip(args.host) else ["127.0.0.1"]
    if args.dev_cert_dir:
        files = certs.generate(Path(args.dev_cert_dir), ["localhost"], ips)
        return files.cert, files.key, f"development certificates in {args.dev_cert_dir} (CA: {files.ca_cert})"
    out = Path(tempfile.mkdtemp(prefix="tasgate-dev-certs-"))
    scratch.append(out)
    files = certs.generate(out, ["localhost"], ips)
    files.ca_key.unlink()
    return files.cert, files.key, f"development certificates in {out}, removed at exit (CA: {files.ca_cert})"


def _is_ip(host: str) -> bool:
    import ipaddress  # noqa: PLC0415 - only for this check

    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
