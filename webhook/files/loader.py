"""Read Kubernetes objects from files, directories or stdin: YAML or JSON, multi-document,
`kind: List` flattened. Every error names the file and the document it came from."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SUFFIXES = (".yaml", ".yml", ".json")
MAX_BYTES = 64 * 1024 * 1024


class LoadError(Exception):
    """Input that cannot be read; the message says where."""


@dataclass(frozen=True)
class Document:
    source: str  # file name and document number, for messages
    obj: Mapping[str, Any]


def load(refs: list[str]) -> list[Document]:
    docs: list[Document] = []
    for ref in refs:
        for name, text in _texts(ref):
            docs.extend(_documents(name, text))
    return docs


def _texts(ref: str) -> Iterator[tuple[str, str]]:
    if ref == "-":
        yield "<stdin>", sys.stdin.read(MAX_BYTES)
        return
    path = Path(ref)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES)
        if not files:
            raise LoadError(f"{ref}: no .yaml, .yml or .json files in this directory")
    elif path.is_file():
        files = [path]
    else:
        raise LoadError(f"{ref}: no such file or directory")
    for file in files:
        if file.stat().st_size > MAX_BYTES:
            raise LoadError(f"{file}: larger than {MAX_BYTES // 2**20} MiB")
        try:
            yield str(file), file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise LoadError(f"{file}: cannot read: {exc}") from None


def _documents(name: str, text: str) -> Iterator[Document]:
    raw: list[Any] = []
    try:
        if name.endswith(".json"):
            raw.append(json.loads(text))
        else:
            for doc in yaml.safe_load_all(text):  # parsed lazily: `raw` holds the good documents
                raw.append(doc)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        language = "JSON" if name.endswith(".json") else "YAML"
        raise LoadError(f"{name} (document {len(raw) + 1}): not valid {language}: {exc}") from None
    for index, doc in enumerate(raw, start=1):
        where = f"{name} (document {index})"
        if doc is None:
            continue
        if not isinstance(doc, Mapping):
            raise LoadError(f"{where}: expected a Kubernetes object, got {type(doc).__name__}")
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
