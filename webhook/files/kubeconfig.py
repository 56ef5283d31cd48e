"""Which kubeconfig a command reads, found as kubectl finds it.

kubectl reads ``--kubeconfig``, else ``$KUBECONFIG``, else ``~/.kube/config``. ``$KUBECONFIG`` may
be a list (``:``-separated): the files of it that exist are merged in order, the first file to
name a cluster, user or context wins, and so does the first ``current-context``. tasgate does the
same for ``check``, ``map`` and ``status`` (``--kubeconfig`` may be such a list too). The client
library merges the files but lets a later ``current-context`` win, so ``current_context`` here is
the one kubectl would use and is passed on explicitly. None of the files existing is "no such
file", said with the paths, never the library's "Invalid kube-config file".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from webhook.files.loader import YAML_LOADER, LoadError

DEFAULT_NAMESPACE = "default"


@dataclass(frozen=True)
class Kubeconfig:
    """The kubeconfig files that exist, in merge order, and what kubectl reads from them."""

    files: tuple[str, ...]
    current_context: str | None = None
    # Context name -> its namespace ("" for none), first file wins (kubectl's merge rule).
    contexts: Mapping[str, str] = field(default_factory=dict)

    @property
    def config_file(self) -> str:
        """What the client library loads: the files joined as ``$KUBECONFIG`` joins them."""
        return os.pathsep.join(self.files)

    def use(self, chosen: str | None) -> str:
        """The context to use: ``--context``, else the ``current-context``; one that is not
        there is said plainly, with the ones that are."""
        name = chosen or self.current_context
        if name and name in self.contexts:
            return name
        known = ", ".join(sorted(self.contexts)) or "none"
        where = self.config_file
        if not name:
            raise LoadError(f"kubeconfig {where}: no current-context; give --context (contexts: {known})")
        raise LoadError(f'kubeconfig {where}: no context "{name}" (contexts: {known})')

    def namespace(self, chosen: str | None) -> str:
        """The namespace of the context in use (kubectl's default for ``-n``), else ``default``."""
        return self.contexts.get(chosen or self.current_context or "", "") or DEFAULT_NAMESPACE


def default_kubeconfig(environ: Mapping[str, str] | None = None) -> str:
    """``$KUBECONFIG`` when set and not empty, else ``~/.kube/config`` (kubectl's order)."""
    env = os.environ if environ is None else environ
    return env.get("KUBECONFIG", "") or str(Path.home() / ".kube" / "config")


def first_existing(paths: str) -> str:
    """The first file of a kubeconfig list that exists (else the first named): for the server,
    whose start-up takes one file."""
    names = _names(paths)
    return next((n for n in names if Path(n).is_file()), names[0] if names else paths)


def locate(paths: str) -> Kubeconfig:
    """The files of ``paths`` (one path or a list) that exist, merged as kubectl merges them."""
    found = [name for name in _names(paths) if Path(name).is_file()]
    if not found:
        raise LoadError(f"kubeconfig {paths}: no such file")
    docs = [(name, doc) for name in found if (doc := _read(name))]  # the library cannot merge an empty one
    if not docs:
        raise LoadError(f"kubeconfig {paths}: empty")
    current: str | None = None
    contexts: dict[str, str] = {}
    for _, doc in docs:
        current = current or str(doc.get("current-context") or "") or None
        for name, namespace in _contexts(doc):
            contexts.setdefault(name, namespace)
    return Kubeconfig(tuple(name for name, _ in docs), current, contexts)


def _contexts(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name, namespace) of each context a file defines."""
    out = []
    for entry in doc.get("contexts") or []:
        if isinstance(entry, Mapping) and entry.get("name"):
            context = entry.get("context")
            namespace = context.get("namespace") if isinstance(context, Mapping) else None
            out.append((str(entry["name"]), str(namespace or "")))
    return out


def _names(paths: str) -> list[str]:
    return [os.path.expanduser(p) for p in paths.split(os.pathsep) if p]


def _read(name: str) -> Mapping[str, Any]:
    try:
        doc = yaml.load(Path(name).read_text(encoding="utf-8"), Loader=YAML_LOADER)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise LoadError(f"kubeconfig {name}: cannot read: {exc}") from None
    if doc is None:
        return {}  # an empty file merges as nothing, as in kubectl
    if not isinstance(doc, Mapping):
        raise LoadError(f"kubeconfig {name}: not a kubeconfig (expected a mapping)")
    return doc
