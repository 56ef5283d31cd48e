"""The `tasgate` command line: check, map, test, status, serve, certs, sample-cluster."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

import orjson
import yaml

from scorer import EngineError
from webhook.cli import check, render, status, suite, topomap
from webhook.cli.sources import state_for
from webhook.decide.patch import apply_entries
from webhook.decide.policy import PolicyError
from webhook.files.loader import LoadError, load_each
from webhook.files.policy import load_policy
from webhook.files.sample import sample_objects
from webhook.serve import certs
from webhook.serve.flags import add_arguments as serve_arguments
from webhook.serve.main import run as serve_run
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
        prog="tasgate", description="Admission gate for topology-aware gang scheduling."
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command")
    chk = sub.add_parser("check", help="judge workload manifests offline, as the webhook would")
    chk.add_argument(
        "-f", "--filename", action="append", required=True, metavar="FILE",
        help="YAML/JSON manifest(s), a directory, or - for stdin (repeatable)",
    )  # fmt: skip
    _state_arguments(chk)
    chk.add_argument("-o", "--output", choices=("text", "json", "yaml", "patched"), default="text")
    chk.add_argument("-n", "--namespace", default="default", help="namespace for objects that name none")
    chk.add_argument(
        "--fail-on", default=",".join(check.DEFAULT_FAIL_ON), type=check.parse_fail_on,
        help="outcomes that make the run exit 1: denied, waits, unchecked (default: denied); "
        "unreadable input always exits 2",
    )  # fmt: skip
    chk.set_defaults(handler=_check)
    topo = sub.add_parser("map", help="the topology: free accelerators per domain, gang fits, waiting gangs")
    topo.add_argument(
        "-f", "--filename", action="append", metavar="FILE",
        help="workload manifest(s) whose must-wait verdicts are drawn as waiting gangs (repeatable)",
    )  # fmt: skip
    _state_arguments(topo)
    topo.add_argument("-o", "--output", choices=("text", "html"), default="text")
    topo.add_argument("-n", "--namespace", default="default", help="namespace for objects that name none")
    topo.set_defaults(handler=_map)
    tst = sub.add_parser("test", help="run policy test suites: manifests with their expected outcomes")
    tst.add_argument("paths", nargs="+", metavar="DIR|FILE", help="suite files, or directories holding them")
    tst.set_defaults(handler=suite.run)
    status.add_arguments(
        sub.add_parser("status", help="every tracked gang of a live cluster: state, reason, age")
    )
    dump = sub.add_parser("sample-cluster", help="print the embedded sample cluster as YAML")
    dump.set_defaults(handler=_sample)
    serve = sub.add_parser("serve", help="run the admission webhook over HTTPS")
    serve_arguments(serve)
    serve.set_defaults(handler=serve_run)
    tls = sub.add_parser("certs", help="create a CA and a serving certificate; print the caBundle")
    tls.add_argument(
        "--dns-name", action="append", default=[], help="a DNS name (SAN) of the service (repeatable)"
    )
    tls.add_argument("--ip", action="append", default=[], help="an IP address (SAN) (repeatable)")
    tls.add_argument("--out", required=True, help="directory for ca.crt, ca.key, tls.crt, tls.key")
    tls.add_argument("--days", type=int, default=365)
    tls.set_defaults(handler=_certs)
    return parser


def _state_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state", "--cluster", dest="state", action="append", metavar="FILE|DIR",
        help="cluster state from these files: what `kubectl get nodes,pods,namespaces,limitranges -A "
        "-o yaml` and `kubectl get topologies,resourceflavors,clusterqueues,localqueues -A -o yaml` print "
        "(--cluster is an alias); default: the embedded sample GPU cluster",
    )  # fmt: skip
    parser.add_argument("--kubeconfig", help="read the state from this cluster's API server instead")
    parser.add_argument("--context", help="the kubeconfig context to use (with --kubeconfig)")
    parser.add_argument(
        "--policy", default="default", help="policy file, or 'default' / 'none' (default: default)"
    )


def _check(args: argparse.Namespace) -> int:
    policy = load_policy(args.policy)
    state = state_for(args.state, args.kubeconfig, args.context)
    results = check.check_all(load_each(args.filename), state, policy, args.namespace)
    if args.output == "json":
        document = check.report(results, state.rejected)
        sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif args.output == "yaml":
        sys.stdout.write(yaml.safe_dump(check.report(results, state.rejected), sort_keys=False))
    elif args.output == "patched":
        patched = [
            apply_entries(r.obj, r.decision.patch) for r in results if r.obj is not None and r.decision
        ]
        sys.stdout.write(yaml.safe_dump_all(patched, sort_keys=False))
        print(check.summary_line(results), file=sys.stderr)
    else:
        print(render.render(results))
    return check.exit_code(results, args.fail_on)


def _map(args: argparse.Namespace) -> int:
    policy = load_policy(args.policy)
    state = state_for(args.state, args.kubeconfig, args.context)
    source = args.kubeconfig or ", ".join(args.state or ["the sample cluster"])
    return topomap.run(state, policy, args.filename, args.namespace, args.output, f"tasgate map · {source}")


def _certs(args: argparse.Namespace) -> int:
    try:
        files = certs.generate(Path(args.out), args.dns_name, args.ip, args.days)
    except (ValueError, OSError) as exc:
        return _fail(str(exc))
    print(f"wrote {files.ca_cert}, {files.cert}, {files.key}", file=sys.stderr)
    print(certs.ca_bundle(files.ca_cert))
    return EXIT_OK


def _sample(args: argparse.Namespace) -> int:
    sys.stdout.write(yaml.safe_dump_all(sample_objects(), sort_keys=False))
    return EXIT_OK


def _fail(message: str) -> int:
    print(f"tasgate: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


if __name__ == "__main__":
    raise SystemExit(main())
