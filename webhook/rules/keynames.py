"""How close a label or annotation key is to one Kueue v0.19.2 or tasgate defines.

Kueue ignores keys it does not define, so a typo in ``kueue.x-k8s.io/podset-preferred-topology``
silently drops the request. ``examine`` says, for one key, whether it is a near-miss and of what.

Keys are compared on their *name* (the part after ``/``), first in a compact form: lower case,
without ``-``, ``_``, ``.``, ``/`` or ``:`` (so case, camelCase and separator slips cost
nothing). A name is close to a known one, best first, when

0. the compact forms are equal (``podset_required_topology``, ``PodSetRequiredTopology``);
1. it has the same words in another order (``topology-required-podset``);
2. the optimal-string-alignment distance of the compact forms (Damerau–Levenshtein: insert,
   delete, substitute, or swap two neighbours, each 1) is at most ``1 + len // 8`` of the known
   compact name: 1 edit for ``job-uid``, 2 for ``queue-name``, 3 for ``podset-preferred-topology``;
3. one word is missing, extra or replaced, two or more shared (``podset-slice-topology``);
4. one compact form contains the other, the shorter of 5+ letters (``queue``, ``injection``).

Ties go to fewer edits, then the nearer length. How hard a key is looked at depends on its
prefix, so that other projects' keys stay quiet:

- ``kueue.x-k8s.io/`` or ``tasgate.io/`` exactly: every unknown key is reported, with the
  closest known key if any (all five tests, 1 also ignoring a missing ``podset-``: people's keys
  first, then Kueue's own writes by tests 0–2, then the other prefix's people's keys, strictly).
- a prefix that is a slip of one of those (within 2 edits: ``kueue.k8s.io``, ``Kueue.x-k8s.io``,
  ``kueue.x-k8s.oi``; a first label within 1 edit: ``kueue.sigs.k8s.io``, ``tasgate.com``; or its
  tail: ``x-k8s.io``), or the prefix glued on without ``/`` (``kueue.x-k8s.io.queue-name``):
  reported only when the name is close to a key people write there, *strictly* (tests 0–2,
  1 also ignoring ``podset-``, 2 with ``max(1, len // 8)`` edits).
- no prefix (``podset-required-topology``): reported only when strictly close to a
  people-written Kueue key that is distinctive (a hyphenated name of 9+ letters: ``queue-name``,
  not ``managed`` or ``podset``).
- any other prefix: reported only when the name is strictly close to a topology request key
  (nobody else names a key ``podset-required-topology``); ``provreq.kueue.x-k8s.io/`` is Kueue's
  free-form ProvisioningRequest prefix and never reported.

A key without a prefix is legal (it is the user's own): being "not a Kueue key" is said only when
it is that close to one.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from webhook.model.keys import FAMILIES, KUEUE_USER_KEYS, PROVREQ_PREFIX, TOPOLOGY_KEYS

_SEPARATORS = re.compile(r"[-_./\\:\s]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_GLUE = "./:_-\\ "
MIN_CONTAINED = 5  # the shorter compact name must have this many letters to count as contained
MAX_KEY = 320  # longer than any valid key (253 + 1 + 63): not examined


def compact(name: str) -> str:
    """``Podset_Required.Topology`` → ``podsetrequiredtopology``."""
    return _SEPARATORS.sub("", name).lower()


@dataclass(frozen=True)
class Family:
    """A prefix (``kueue.x-k8s.io/``), the keys people write under it, and those only Kueue writes."""

    prefix: str
    user: frozenset[str]
    written: frozenset[str]
    owner: str  # who ignores an unknown key: "Kueue v0.19.2", "tasgate"

    @property
    def known(self) -> frozenset[str]:
        return self.user | self.written


_OWNERS = ("Kueue v0.19.2", "tasgate")
ALL_FAMILIES = tuple(Family(p, u, w, o) for (p, u, w), o in zip(FAMILIES, _OWNERS, strict=True))
KUEUE, TASGATE = ALL_FAMILIES
KNOWN = KUEUE.known | TASGATE.known
# What a key without any prefix is compared with: hyphenated names of 9+ letters (not ``podset``).
DISTINCTIVE = frozenset(
    k for k in KUEUE_USER_KEYS if "-" in (n := k.partition("/")[2]) and len(compact(n)) >= 9
)


@dataclass(frozen=True)
class Finding:
    """A key Kueue/tasgate does not define: ``own`` when under their exact prefix (then always
    reported), ``suggestion`` the known key it is closest to (None: nothing is close)."""

    key: str
    family: Family
    own: bool
    suggestion: str | None


@lru_cache(maxsize=4096)
def examine(key: str) -> Finding | None:
    """What to say about ``key``: None for a known key or one that is nobody's near-miss."""
    if key in KNOWN or len(key) > MAX_KEY or key.startswith(PROVREQ_PREFIX):
        return None
    prefix, slash, name = key.partition("/")
    if not slash:
        return _unprefixed(key)
    own = next((f for f in ALL_FAMILIES if prefix + "/" == f.prefix), None)
    if own is not None:
        return Finding(key, own, True, _own_suggestion(name, own))
    near = near_family(prefix)
    if near is not None:
        return _found(key, near, closest(name, near.user, strict=True, loose=True))
    return _found(key, KUEUE, closest(name, TOPOLOGY_KEYS, strict=True))


def _own_suggestion(name: str, family: Family) -> str | None:
    """People's keys of the family first, then Kueue's own writes, then the other family's."""
    found = closest(name, family.user, loose=True) or closest(name, family.written)
    if found is not None:
        return found
    others = (f.user for f in ALL_FAMILIES if f is not family)
    return next((s for keys in others if (s := closest(name, keys, strict=True))), None)


def _unprefixed(key: str) -> Finding | None:
    lower = key.lower()
    for family in ALL_FAMILIES:
        glued = family.prefix[:-1]
        if lower.startswith(glued) and len(key) > len(glued):
            rest = key[len(glued) :].lstrip(_GLUE)
            return _found(key, family, closest(rest, family.user, strict=True, loose=True))
    return _found(key, KUEUE, closest(key, DISTINCTIVE, strict=True))


def _found(key: str, family: Family, suggestion: str | None) -> Finding | None:
    return Finding(key, family, False, suggestion) if suggestion else None


def near_family(prefix: str) -> Family | None:
    """The family whose prefix ``prefix`` is a slip of: within 2 edits, a first DNS label within
    1 edit (``kueue.sigs.k8s.io``, ``tasgate.com``), or its tail (``x-k8s.io``)."""
    given = prefix.lower().replace("_", "-")
    for family in ALL_FAMILIES:
        own = family.prefix[:-1]
        if distance(given, own, 2) is not None:
            return family
        if distance(given.split(".")[0], own.split(".")[0], 1) is not None:
            return family
        if "." in given and own.endswith("." + given):
            return family
    return None


def closest(name: str, keys: Iterable[str], strict: bool = False, loose: bool = False) -> str | None:
    """The key in ``keys`` whose name is closest to ``name``, if one is close enough.

    ``strict`` allows fewer edits; ``loose`` (for a Kueue or tasgate prefix) also accepts a name
    without ``podset-`` and, when not strict, one word missing, extra or replaced, or one name
    contained in the other.
    """
    given = _name(name)
    if not given.compact:
        return None
    best: tuple[tuple[int, int, int, str], str] | None = None
    for key in keys:
        rank = _rank(given, _name(key.rpartition("/")[2]), strict, loose)
        if rank is not None and (best is None or (*rank, key) < best[0]):
            best = ((*rank, key), key)
    return best[1] if best else None


@dataclass(frozen=True)
class _Name:
    """A key's name in the forms compared: compact, its words sorted, and those without ``podset``."""

    compact: str
    words: tuple[str, ...]
    loose_words: tuple[str, ...]  # without ``podset``: only under a Kueue-like prefix (Volcano has
    # a ``group-name`` of its own, which is not ``podset-group-name``)


@lru_cache(maxsize=4096)
def _name(name: str) -> _Name:
    words = sorted(w.lower() for w in _SEPARATORS.split(_CAMEL.sub("-", name)) if w)
    return _Name(compact(name), tuple(words), tuple(w for w in words if w != "podset"))


def _rank(given: _Name, known: _Name, strict: bool, loose: bool) -> tuple[int, int, int] | None:
    """(test, edits, length gap) when ``given`` is close to ``known``; lower is closer."""
    gap = abs(len(given.compact) - len(known.compact))
    if given.compact == known.compact:
        return (0, 0, 0)
    words = (given.loose_words, known.loose_words) if loose else (given.words, known.words)
    if words[0] == words[1] != ():
        return (1, 0, gap)
    edits = distance(given.compact, known.compact, limit(len(known.compact), strict))
    if edits is not None:
        return (2, edits, gap)
    if not loose or strict:
        return None
    differ = _word_change(given.words, known.words)
    if differ is not None:
        return (3, differ, gap)
    shorter, longer = sorted((given.compact, known.compact), key=len)
    if len(shorter) >= MIN_CONTAINED and shorter in longer:
        return (4, gap, gap)
    return None


def _word_change(given: tuple[str, ...], known: tuple[str, ...]) -> int | None:
    """How many words differ when one is missing, extra or replaced and two or more are shared
    (``podset-slice-topology``, ``podset-required-topology-level``, ``podset-preferred-level``)."""
    shared = len(given) - len(Counter(given) - Counter(known))
    differ = len(given) + len(known) - 2 * shared
    return differ if shared >= 2 and max(len(given), len(known)) - shared == 1 else None


def limit(length: int, strict: bool = False) -> int:
    """Edits allowed against a known compact name of ``length`` letters."""
    return max(1, length // 8) if strict else 1 + length // 8


def distance(a: str, b: str, most: int) -> int | None:
    """Optimal-string-alignment distance of ``a`` and ``b`` if at most ``most``, else None.

    Rows stop early once every cell exceeds ``most``, so comparing a long key costs little.
    """
    if abs(len(a) - len(b)) > most:
        return None
    before: list[int] = []
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                current[j] = min(current[j], before[j - 2] + 1)
        if min(current) > most:
            return None
        before, row = row, current
    return row[-1] if row[-1] <= most else None
