"""Field paths as Kubernetes prints them (``spec.a[0].b[Key]``) and as JSON Patch walks them.

A workload's PodSet templates are addressed by one path each; validation errors print it the way
``field.Path`` does and the patch builder turns it into a JSON Pointer.
"""

from __future__ import annotations

from collections.abc import Sequence


class Key(str):
    """A map key in a JSON path (``Master`` in ``pytorchReplicaSpecs``).

    It is a plain ``str`` for JSON Patch, but field paths print it as ``[Master]``, the way
    Kubernetes prints ``field.Path.Key``.
    """

    __slots__ = ()


PathPart = str | int
Path = tuple[PathPart, ...]


def field_path(parts: Sequence[PathPart]) -> str:
    """Render a JSON path the way Kubernetes field errors do: ``spec.a[0].b[Key]``."""
    out = ""
    for part in parts:
        if isinstance(part, int | Key):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def key(path: str, name: str) -> str:
    """``field.Path.Key``: ``annotations[kueue.x-k8s.io/podset-slice-size]``."""
    return f"{path}[{name}]"
