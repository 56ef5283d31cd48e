"""Read Kubernetes objects from files, directories or stdin: YAML or JSON, multi-document,
`kind: List` flattened. Every error names the file and the document it came from."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from webhook.wire.admission import MAX_DEPTH, too_deep

SUFFIXES = (".yaml", ".yml", ".json")
# libyaml's loader when PyYAML was built with it: a 10k-node dump in seconds, not minutes.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_BYTES = 64 * 1024 * 1024


class LoadError(Exception):
    """Input that cannot be read; the message says where."""


@dataclass(frozen=True)
class Document:
    source: str  # file name and document number, for messages
    obj: Mapping[str, Any]


@dataclass(frozen=True)
class LoadFailure:
    """One file (or document) that could not be read; the rest of the input goes on."""

    source: str
    message: str


def load(refs: list[str]) -> list[Document]:
    """Every document of every input; the first unreadable one raises ``LoadError``."""
    docs: list[Document] = []
    for ref in refs:
        for name, text in _texts(ref):
            docs.extend(_documents(name, text))
    return docs


def load_each(refs: list[str], recursive: bool = True) -> Iterator[Document | LoadFailure]:
    """Every document, with each unreadable file or document reported in its place;
    ``recursive`` False reads only a directory's own files (kubectl without ``-R``)."""
    for ref in refs:
        try:
            texts = list(_text_refs(ref, recursive))
        except LoadError as exc:
            yield LoadFailure(ref, str(exc))
            continue
        for name, read in texts:
            try:
                yield from list(_documents(name, read()))
            except LoadError as exc:
                yield LoadFailure(name, str(exc))


def _texts(ref: str) -> Iterator[tuple[str, str]]:
    for name, read in _text_refs(ref):
        yield name, read()


def _text_refs(ref: str, recursive: bool = True) -> Iterator[tuple[str, Callable[[], str]]]:
    """(name, reader) per input file: a directory's files in order, or stdin."""
    if ref == "-":
        yield "<stdin>", lambda: sys.stdin.read(MAX_BYTES)
        return
    path = Path(ref)
    if path.is_dir():
        found = path.rglob("*") if recursive else path.glob("*")
        files = sorted(p for p in found if p.is_file() and p.suffix in SUFFIXES)
        if not files:
            deeper = "" if recursive else " (--no-recursive: its subdirectories are not read)"
            raise LoadError(f"{ref}: no .yaml, .yml or .json files in this directory{deeper}")
    elif path.is_file():
        files = [path]
    else:
        raise LoadError(f"{ref}: no such file or directory")
    for file in files:
        yield str(file), lambda file=file: _read(file)  # type: ignore[misc]


def _read(file: Path) -> str:
    if file.stat().st_size > MAX_BYTES:
        raise LoadError(f"{file}: larger than {MAX_BYTES // 2**20} MiB")
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LoadError(f"{file}: cannot read: {exc}") from None


def _documents(name: str, text: str) -> Iterator[Document]:
    raw: list[Any] = []
    try:
        if name.endswith(".json"):
            raw.append(orjson.loads(text))
        else:
            for doc in yaml.load_all(text, Loader=YAML_LOADER):  # lazily: `raw` holds the good ones
                raw.append(doc)
    except (yaml.YAMLError, orjson.JSONDecodeError, RecursionError) as exc:
        language = "JSON" if name.endswith(".json") else "YAML"
        raise LoadError(f"{name} (document {len(raw) + 1}): not valid {language}: {exc}") from None
    for index, doc in enumerate(raw, start=1):
        where = f"{name} (document {index})"
        if doc is None:
            continue
        if not isinstance(doc, Mapping):
            raise LoadError(f"{where}: expected a Kubernetes object, got {type(doc).__name__}")
        if too_deep(doc):  # as a review's body is refused: every later walk of it would recurse
            raise LoadError(f"{where}: nests values more than {MAX_DEPTH} levels deep")
        yield from _flatten(where, doc)


def _flatten(where: str, doc: Mapping[str, Any]) -> Iterator[Document]:
    if str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
        for i, item in enumerate(doc["items"]):
            if not isinstance(item, Mapping):
                raise LoadError(f"{where}: items[{i}] is not an object")
            yield Document(f"{where} items[{i}]", item)
        return
    if not doc.get("kind") or not doc.get("apiVersion"):
        raise LoadError(f"{where}: not a Kubernetes object (apiVersion and kind are required)")
    yield Document(where, doc)
