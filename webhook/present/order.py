"""Natural order of domain names: r2 before r10, h9 before h10 — the order a person counts in.

Kueue's own order (and a plain string sort) puts r10 and r11 between r1 and r2; a picture in
that order makes a person hunt for every rack. Digits compare as numbers, the rest as text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[tuple[int | str, ...], str]:
    """Text and number runs alternate (text first), so equal positions always hold equal types;
    the raw name last keeps r01 and r1 apart and the order total."""
    runs = _DIGITS.split(name)
    return tuple(int(run) if i % 2 else run.casefold() for i, run in enumerate(runs)), name


def path_key(path: Sequence[str]) -> tuple[tuple[tuple[int | str, ...], str], ...]:
    return tuple(natural_key(part) for part in path)
