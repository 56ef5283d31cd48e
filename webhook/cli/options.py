"""The flags the commands share, spelt as kubectl spells them, and how ``--help`` shows them.

One place says what ``--state`` (alias ``--cluster``), ``--kubeconfig``, ``--context``, ``--live``,
``-f``/``-R`` and ``-n`` mean, so ``check``, ``map`` and ``status`` cannot drift apart. Where tasgate
departs from kubectl it does so on purpose, in the safe direction: a directory is read
recursively unless ``--no-recursive`` (a pipeline pointed at a tree must not silently check
less), and ``check``/``map`` read the embedded sample cluster unless asked for a live one
(``--live``, ``--kubeconfig`` or ``--context``), so ``$KUBECONFIG`` alone never turns an offline CI
step into a call to whatever cluster the runner happens to point at.
"""

from __future__ import annotations

import argparse
from typing import Any

from webhook.cli.dump import dump_commands
from webhook.files.kubeconfig import default_kubeconfig, locate

KUBECONFIG_HELP = (
    "kubeconfig file (or a ':'-separated list, merged as kubectl merges $KUBECONFIG); "
    "default: $KUBECONFIG, else ~/.kube/config"
)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's default in ``--help``, unless there is none to show or the text says it.

    A flag (an option that takes no value) never shows one: kubectl's ``-R, --recursive`` is
    read as "on when given", and "(default: True)" under it reads as a Python value."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        flag = action.nargs == 0
        if flag or "%(default)" in text or "default:" in text or action.default in (None, False, [], ()):
            return text
        return super()._get_help_string(action)


def command(sub: Any, name: str, description: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A subcommand whose one line is both its entry in ``tasgate --help`` and its own description."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=description, description=description, formatter_class=HelpFormatter, **kwargs
    )
    return parser


def add_file_arguments(parser: argparse.ArgumentParser, required: bool, what: str) -> None:
    parser.add_argument(
        "-f", "--filename", action="append", required=required, metavar="FILE",
        help=f"{what}: YAML/JSON, a directory, or - for stdin (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "-R", "--recursive", action="store_true", default=True,
        help="process the directory used in -f, --filename recursively, as kubectl -R does "
        "(on unless --no-recursive: a pipeline pointed at a tree must not check less)",
    )  # fmt: skip
    parser.add_argument(
        "--no-recursive", dest="recursive", action="store_false",
        help="read only the files directly in a -f directory, as kubectl without -R",
    )  # fmt: skip


def add_state_arguments(parser: argparse.ArgumentParser) -> None:
    """Where ``check`` and ``map`` take the cluster state from: files, a live cluster, the sample."""
    parser.add_argument(
        "--state", "--cluster", dest="state", action="append", metavar="FILE|DIR",
        help="cluster state from these files (repeatable; --cluster is an alias): what "
        + ", ".join(f"`{c.command}`" + (" (where served)" if c.when else "") for c in dump_commands())
        + " print; default: the embedded sample GPU cluster",
    )  # fmt: skip
    parser.add_argument(
        "--live", action="store_true",
        help="read the state from a cluster's API server (--kubeconfig, else $KUBECONFIG, else "
        "~/.kube/config) instead of the sample; implied by --kubeconfig and --context",
    )  # fmt: skip
    add_kubeconfig_arguments(parser)
    add_policy_argument(parser, "policy file, or 'default' / 'none'")


def add_kubeconfig_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", metavar="PATH", help=KUBECONFIG_HELP)
    parser.add_argument(
        "--context", metavar="NAME", help="the kubeconfig context; default: its current-context"
    )


def add_policy_argument(parser: argparse.ArgumentParser, text: str) -> None:
    parser.add_argument("--policy", default="default", metavar="FILE|default|none", help=text)


def add_namespace_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-n", "--namespace",
        help="namespace for objects that name none; default: the context's namespace when reading a "
        "cluster, else default",
    )  # fmt: skip


def live_kubeconfig(args: argparse.Namespace) -> str | None:
    """The kubeconfig to read a live state from, or None for files or the sample cluster."""
    if args.kubeconfig:
        return str(args.kubeconfig)
    return default_kubeconfig() if args.live or args.context else None


def namespace_of(args: argparse.Namespace, kubeconfig: str | None) -> str:
    """``-n``, else kubectl's default: the namespace of the context in use, else ``default``."""
    if args.namespace:
        return str(args.namespace)
    return locate(kubeconfig).namespace(args.context) if kubeconfig else "default"
