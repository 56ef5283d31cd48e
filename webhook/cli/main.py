"""The `tasgate` command line: check, map, test, status, version, serve, certs, sample-cluster."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

import yaml

from scorer import EngineError
from webhook.cli import check, options, output, status, suite, topomap, version
from webhook.cli.inputs import nothing_checked, parse_fail_on
from webhook.cli.sources import checkable, source_name, state_for, with_workers
from webhook.decide.policy import PolicyError
from webhook.files.loader import LoadError, load_each
from webhook.files.policy import load_policy
from webhook.files.sample import sample_objects
from webhook.serve import certs, certs_dir
from webhook.serve.flags import add_arguments as serve_arguments
from webhook.serve.main import run as serve_run
from webhook.state.cluster import ClusterState
from webhook.wire.errors import BadRequest, InvalidObject

EXIT_OK, EXIT_DENIED, EXIT_BAD_INPUT = 0, 1, 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.version:
        print(f"tasgate {_version()}")
        return EXIT_OK
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        code: int = args.handler(args)
    except (LoadError, PolicyError, ValueError) as exc:
        return _fail(str(exc))
    except (InvalidObject, BadRequest) as exc:
        return _fail(f"bad cluster state: {exc}")
    except EngineError as exc:  # an internal error, never a verdict
        return _fail(f"internal error: {exc}")
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    return code


def _version() -> str:
    try:
        return metadata.version("tasgate")
    except metadata.PackageNotFoundError:
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tasgate",
        description="Admission gate for topology-aware gang scheduling.",
        formatter_class=options.HelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command")
    _check_parser(options.command(sub, "check", "judge workload manifests offline, as the webhook would"))
    _map_parser(
        options.command(sub, "map", "the topology: free accelerators per domain, gang fits, waiting gangs")
    )
    suite.add_arguments(
        options.command(sub, "test", "run policy test suites: manifests with their expected outcomes")
    )
    status.add_arguments(
        options.command(sub, "status", "every tracked gang of a live cluster: state, reason, age")
    )
    version.add_arguments(
        options.command(sub, "version", "the client version, its build, and the Kueue and Kubernetes proven")
    )
    dump = options.command(sub, "sample-cluster", "print the embedded sample cluster as YAML")
    dump.set_defaults(handler=_sample)
    serve = options.command(sub, "serve", "run the admission webhook over HTTPS")
    serve_arguments(serve)
    serve.set_defaults(handler=serve_run)
    _certs_parser(options.command(sub, "certs", "create a CA and a serving certificate; print the caBundle"))
    return parser


def _check_parser(chk: argparse.ArgumentParser) -> None:
    options.add_file_arguments(chk, required=True, what="the workload manifests to judge")
    options.add_state_arguments(chk)
    chk.add_argument(
        "--worker", action="append", default=[], metavar="NAME=FILE|DIR",
        help="a MultiKueue worker cluster's state, as --state reads it (repeatable): a gang of a "
        "MultiKueue queue is judged on each worker, not on this cluster's nodes",
    )  # fmt: skip
    chk.add_argument("-o", "--output", choices=output.FORMATS, default="text", help="output format")
    options.add_namespace_argument(chk)
    chk.add_argument(
        "--fail-on", default=",".join(check.DEFAULT_FAIL_ON), type=parse_fail_on,
        metavar="OUTCOME,…",
        help="outcomes that make the run exit 1: denied, waits, unchecked (default: denied); "
        "unreadable input always exits 2",
    )  # fmt: skip
    chk.set_defaults(handler=_check)


def _map_parser(topo: argparse.ArgumentParser) -> None:
    options.add_file_arguments(
        topo, required=False, what="workload manifests whose must-wait verdicts are drawn as waiting gangs"
    )
    options.add_state_arguments(topo)
    topo.add_argument("-o", "--output", choices=("text", "html"), default="text", help="output format")
    options.add_namespace_argument(topo)
    topo.set_defaults(handler=_map)


def _certs_parser(tls: argparse.ArgumentParser) -> None:
    tls.add_argument(
        "--dns-name", action="append", default=[], help="a DNS name (SAN) of the service (repeatable)"
    )
    tls.add_argument("--ip", action="append", default=[], help="an IP address (SAN) (repeatable)")
    tls.add_argument("--out", required=True, help="directory for ca.crt, ca.key, tls.crt, tls.key")
    tls.add_argument("--days", type=int, default=365, help="validity of the serving certificate")
    tls.add_argument(
        "--rotate-ca",
        "--force",
        action="store_true",
        help="replace the CA already in --out (kept by default, so every caBundle made from it stays "
        "valid); every caBundle must then be updated",
    )
    tls.set_defaults(handler=_certs)


def _check(args: argparse.Namespace) -> int:
    policy = load_policy(args.policy)
    kubeconfig = options.live_kubeconfig(args)
    state = with_workers(_state(args, kubeconfig), args.worker)
    namespace = options.namespace_of(args, kubeconfig)
    items = list(load_each(args.filename, args.recursive))
    results = check.check_all(items, state, policy, namespace)
    output.write(results, state.rejected, args.output)
    if not results:  # exit 2, and the reason: never a bare "checked 0"
        print(f"tasgate: error: {nothing_checked(items)}", file=sys.stderr)
    return check.exit_code(results, args.fail_on)


def _map(args: argparse.Namespace) -> int:
    policy = load_policy(args.policy)
    kubeconfig = options.live_kubeconfig(args)
    state = _state(args, kubeconfig)
    namespace = options.namespace_of(args, kubeconfig)
    title = f"tasgate map · {source_name(args.state, kubeconfig, args.context)}"
    files = list(load_each(args.filename, args.recursive)) if args.filename else []
    return topomap.run(state, policy, files, namespace, args.output, title)


def _state(args: argparse.Namespace, kubeconfig: str | None) -> ClusterState:
    state = state_for(args.state, kubeconfig, args.context)
    return checkable(state, source_name(args.state, kubeconfig, args.context))


def _certs(args: argparse.Namespace) -> int:
    try:
        issued = certs_dir.issue(Path(args.out), args.dns_name, args.ip, args.days, args.rotate_ca)
    except (ValueError, OSError) as exc:
        return _fail(str(exc))
    for line in issued.report():
        print(line, file=sys.stderr)
    print(certs.ca_bundle(issued.files.ca_cert))
    return EXIT_OK


def _sample(args: argparse.Namespace) -> int:
    sys.stdout.write(yaml.safe_dump_all(sample_objects(), sort_keys=False))
    return EXIT_OK


def _fail(message: str) -> int:
    print(f"tasgate: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


if __name__ == "__main__":
    raise SystemExit(main())
