"""`tasgate`: the command line. `check` gives the webhook's verdict offline.

Exit status of `check`: 0 when every workload is allowed, 1 when any is denied, 2 for bad
input or usage (unreadable files, broken YAML, a bad policy or cluster dump).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import orjson
import yaml

from scorer import EngineError
from webhook.decide.decision import decide
from webhook.decide.policy import PolicyError
from webhook.decide.reasons import Reason
from webhook.decide.report import decision_json, decision_text
from webhook.decide.verdicts import Decision, Review
from webhook.files.loader import LoadError, load
from webhook.files.policy import load_policy
from webhook.files.sample import sample_objects
from webhook.files.sources import cluster_state
from webhook.serve import certs
from webhook.serve.flags import add_arguments as serve_arguments
from webhook.serve.main import run as serve_run
from webhook.wire.errors import BadRequest, InvalidObject

EXIT_OK, EXIT_DENIED, EXIT_BAD_INPUT = 0, 1, 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    handler = args.handler
    try:
        code: int = handler(args)
    except (LoadError, PolicyError) as exc:
        return _fail(str(exc))
    except (InvalidObject, BadRequest) as exc:
        return _fail(f"bad cluster state: {exc}")
    except EngineError as exc:  # an internal error, never a verdict
        return _fail(f"internal error: {exc}")
    except BrokenPipeError:
        return EXIT_OK
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tasgate", description="Admission gate for topology-aware gang scheduling."
    )
    sub = parser.add_subparsers(dest="command")
    check = sub.add_parser("check", help="judge workload manifests offline, as the webhook would")
    check.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="FILE",
        help="YAML/JSON manifest(s), a directory, or - for stdin (repeatable)",
    )
    check.add_argument(
        "--cluster",
        action="append",
        metavar="FILE|DIR",
        help="cluster dump: nodes, pods and Kueue objects (kubectl get -o yaml); "
        "default: the embedded sample GPU cluster",
    )
    check.add_argument(
        "--policy", default="default", help="policy file, or 'default' / 'none' (default: default)"
    )
    check.add_argument("-o", "--output", choices=("text", "json"), default="text")
    check.add_argument("-n", "--namespace", default="default", help="namespace for objects that name none")
    check.set_defaults(handler=_check)
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


def _certs(args: argparse.Namespace) -> int:
    try:
        files = certs.generate(Path(args.out), args.dns_name, args.ip, args.days)
    except (ValueError, OSError) as exc:
        return _fail(str(exc))
    print(f"wrote {files.ca_cert}, {files.cert}, {files.key}", file=sys.stderr)
    print(certs.ca_bundle(files.ca_cert))
    return EXIT_OK


def _check(args: argparse.Namespace) -> int:
    policy = load_policy(args.policy)
    state = cluster_state(args.cluster)
    decisions: list[Decision] = []
    for doc in load(args.filename):
        decision = decide(Review(doc.obj, namespace=args.namespace), state, policy)
        if decision.reason is not Reason.NOT_A_WORKLOAD:
            decisions.append(decision)
    if args.output == "json":
        sys.stdout.write(
            orjson.dumps([decision_json(d) for d in decisions], option=orjson.OPT_INDENT_2).decode()
        )
        sys.stdout.write("\n")
    else:
        if not decisions:
            print("no workloads found")
        for d in decisions:
            print(decision_text(d))
    return EXIT_OK if all(d.allowed for d in decisions) else EXIT_DENIED


def _sample(args: argparse.Namespace) -> int:
    sys.stdout.write(yaml.safe_dump_all(sample_objects(), sort_keys=False))
    return EXIT_OK


def _fail(message: str) -> int:
    print(f"tasgate: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


if __name__ == "__main__":
    raise SystemExit(main())
