"""Kubernetes resource quantities: the one parser the project uses.

Quantities are parsed into exact ``Fraction`` values, never floats, because the gate compares
request sums against node capacity and a rounding slip of one milli-CPU flips a verdict. The
grammar and rounding follow ``k8s.io/apimachinery/pkg/api/resource``:

* ``<sign><digits>[.<digits>]<suffix>``; ``1.`` and ``.5`` are allowed, as upstream allows them;
* suffixes: decimal SI ``n u m "" k M G T P E``, binary SI ``Ki … Ei``, or an exponent ``e3``/``E-2``
  (a bare ``E`` is exa, as upstream reads it);
* non-zero values are rounded away from zero to whole nano-units, as ``ParseQuantity`` does.

Deliberately stricter than upstream on degenerate input that upstream reads as zero (``"Gi"``,
``"."``, ``"-"``): a number with no digit at all is an error here, and so is surrounding
whitespace (the API server refuses it). A canonical amount (milli-units for cpu, whole units
for everything else, so ``10Pi`` of memory is fine) must fit in a signed 64-bit integer, the
scorer's arrays; ``canonical`` checks that, also for sums.

ClusterQueue quotas are the exception, as they are in Kueue: ``quota_amount`` reads any
quantity Kueue v0.19.2 accepts (``1E`` cpu, ``1e30``) and saturates what does not fit at
``UNLIMITED``, as Kueue's ``AmountFromQuantity`` does.
"""

from __future__ import annotations

import functools
import math
import re
import reprlib
from decimal import Decimal
from fractions import Fraction

from webhook.wire.errors import InvalidObject

MAX_TEXT_LENGTH = 100
INT64_MAX = 2**63 - 1
# A bound on any single quantity, so arithmetic on it stays cheap; canonical() is the real limit.
MAX_MAGNITUDE = Fraction(INT64_MAX)
NANO = 10**9
# Exponents beyond this are either far over MAX_MAGNITUDE or far under one nano-unit.
_EXPONENT_LIMIT = 40
# Kueue's ``resources.Unlimited`` (sigs.k8s.io/kueue@v0.19.2 pkg/resources/amount.go:54): the
# quota amount that means "effectively infinite"; any sum or comparison with it stays so.
UNLIMITED = INT64_MAX
# amount.go:63 maxCPUQuantityForAmount: from MaxInt64/1000 cores up, a cpu quota is Unlimited
# (its milli-value would not fit); amount.go:67 maxNonCPUQuantityForAmount: MaxInt64 units.
_QUOTA_CPU_BOUND = Fraction(INT64_MAX // 1000)
_QUOTA_BOUND = Fraction(INT64_MAX)

_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SHAPE = re.compile(r"(?P<sign>[+-]?)(?P<whole>[0-9]*)(?:\.(?P<frac>[0-9]*))?(?P<suffix>.*)", re.DOTALL)
_EXPONENT = re.compile(r"[eE](?P<exp>[+-]?[0-9]+)")
# A bad value is echoed in the error, never whole: an attacker's 7 MiB nested list stays out of it.
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxstring, _SHORT.maxother = 2, 4, 4, 40, 40
_SUFFIX_HELP = "valid suffixes are n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or an exponent such as e3"

# Resources counted in bytes, printed back with binary suffixes.
_BYTE_RESOURCES = frozenset({"memory", "ephemeral-storage", "storage"})
_BINARY_UNITS: tuple[tuple[str, int], ...] = (
    ("Pi", 2**50),
    ("Ti", 2**40),
    ("Gi", 2**30),
    ("Mi", 2**20),
    ("Ki", 2**10),
)


def parse_quantity(text: str | int | float, path: str) -> Fraction:
    """Parse a quantity as found in a manifest (YAML may hand us ints and floats too).

    Raises ``InvalidObject`` naming ``path`` when the value is not a quantity or is too large.
    """
    if isinstance(text, str):
        known = _valid_text(text)
        if known is not None:
            return known
    return _parsed(text, path)


@functools.lru_cache(maxsize=4096)
def _valid_text(text: str) -> Fraction | None:
    """Parsed valid strings, remembered: a cluster's pods repeat a few dozen quantity texts, and
    exact parsing is the larger part of a pod event's cost. Invalid texts are parsed again (with
    their path) every time; the cache is bounded whatever a client sends."""
    try:
        return _parsed(text, "")
    except InvalidObject:
        return None


def quota_amount(resource: str, text: str | int | float, path: str) -> int:
    """A ClusterQueue quota (``nominalQuota``, ``borrowingLimit``, ``lendingLimit``) as Kueue
    v0.19.2 counts it: milli-units for cpu, whole units otherwise, ``UNLIMITED`` when too large.

    Kueue's webhook refuses only a negative quota (pkg/webhooks/clusterqueue_webhook.go:359-365)
    and its CRD any text that is not a quantity; everything else is admitted, however large.
    apimachinery's ``Quantity.MilliValue`` of ``1E`` cpu overflows int64 and returns 0 (its
    ``ScaledValue`` drops the overflow flag of ``int64Amount.AsScaledInt64``,
    k8s.io/apimachinery@v0.36.5 pkg/api/resource/quantity.go:828-835 and amount.go:95-101), so
    Kueue converts quotas with ``AmountFromQuantity`` (pkg/resources/amount.go:76-87, used by
    pkg/cache/scheduler/resource.go:72-78) instead: a cpu quota of MaxInt64/1000 cores or more,
    any other of MaxInt64 units or more, is ``Unlimited`` (math.MaxInt64), never wrapped.
    """
    value = _parsed(text, path, saturate=True)
    if value < 0:
        raise InvalidObject.at(path, f"{_quoted(text)}: must be greater than or equal to 0")
    if value >= (_QUOTA_CPU_BOUND if resource == "cpu" else _QUOTA_BOUND):
        return UNLIMITED
    return canonical(resource, value, path)


def _parsed(text: str | int | float, path: str, saturate: bool = False) -> Fraction:
    """``saturate``: any magnitude is read (a quota saturates later); else over 2^63-1 is an error."""
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise InvalidObject.at(path, f"{_SHORT.repr(text)}: must be a quantity string such as 500m or 2Gi")
    if isinstance(text, str) and text != text.strip():
        raise InvalidObject.at(path, f"{_quoted(text)}: must not have leading or trailing spaces")
    value = _number(text, path) if not isinstance(text, str) else _parse_text(text, path, saturate)
    value = _round_to_nano(value)
    if abs(value) > MAX_MAGNITUDE and not saturate:
        raise InvalidObject.at(path, f"{_quoted(text)}: too large (exceeds 2^63-1)")
    return value


def canonical(resource: str, q: Fraction, path: str = "") -> int:
    """The integer the scheduler counts: milli-CPU for ``cpu``, whole units for everything else.

    Rounds away from zero like ``Quantity.MilliValue``/``Quantity.Value``, so a request of
    ``0.1`` GPU still needs one whole GPU. An amount that does not fit in int64 raises
    ``InvalidObject`` naming ``path`` (a sum of containers can overflow where no single one does).
    """
    scaled = q * 1000 if resource == "cpu" else q
    magnitude = math.ceil(abs(scaled))
    if magnitude > INT64_MAX:
        unit = "milli-units" if resource == "cpu" else "units"
        raise InvalidObject.at(path or resource, f"{resource}: too large (its {unit} exceed 2^63-1)")
    return magnitude if scaled >= 0 else -magnitude


def format_quantity(resource: str, amount: int) -> str:
    """Turn a canonical amount back into a short string a person reads in a message."""
    if resource == "cpu":
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if is_byte_resource(resource) and amount != 0:
        for suffix, size in _BINARY_UNITS:
            if amount % size == 0:
                return f"{amount // size}{suffix}"
    return str(amount)


def is_byte_resource(resource: str) -> bool:
    """Whether the resource is counted in bytes (memory, storage, hugepages)."""
    return resource in _BYTE_RESOURCES or resource.startswith("hugepages-")


def _number(value: int | float, path: str) -> Fraction:
    if isinstance(value, int):
        return Fraction(value)
    if not math.isfinite(value):
        raise InvalidObject.at(path, f"{value!r}: must be a finite number")
    # repr() is the shortest text that round-trips, i.e. what the manifest author wrote.
    return Fraction(Decimal(repr(value)))


def _parse_text(text: str, path: str, saturate: bool = False) -> Fraction:
    if not text:
        raise InvalidObject.at(path, '"": must not be empty; write a quantity such as 500m or 2Gi')
    if len(text) > MAX_TEXT_LENGTH:
        raise InvalidObject.at(
            path, f"{_quoted(text[:20] + '...')}: longer than {MAX_TEXT_LENGTH} characters"
        )
    shape = _SHAPE.fullmatch(text)
    assert shape is not None  # the pattern accepts any string
    whole, frac = shape["whole"], shape["frac"] or ""
    if not whole and not frac:
        raise InvalidObject.at(path, f"{_quoted(text)}: must start with a number, as in 500m or 2Gi")
    mantissa = _mantissa(whole, frac)
    if shape["sign"] == "-":
        mantissa = -mantissa
    return mantissa * _multiplier(shape["suffix"], text, path, saturate)


def _mantissa(whole: str, frac: str) -> Fraction:
    return Fraction(int(whole + frac or "0"), 10 ** len(frac))


def _multiplier(suffix: str, text: str, path: str, saturate: bool = False) -> Fraction:
    if suffix in _DECIMAL_SUFFIXES:
        return Fraction(10) ** _DECIMAL_SUFFIXES[suffix]
    if suffix in _BINARY_SUFFIXES:
        return Fraction(2) ** _BINARY_SUFFIXES[suffix]
    exponent = _EXPONENT.fullmatch(suffix)
    if exponent is None and suffix.isalpha():
        raise InvalidObject.at(path, f"{_quoted(text)}: unknown suffix {_quoted(suffix)}; {_SUFFIX_HELP}")
    if exponent is None:
        raise InvalidObject.at(path, f"{_quoted(text)}: not a quantity; write one such as 500m, 1.5Gi or 2e3")
    power = int(exponent["exp"])
    if power > _EXPONENT_LIMIT and saturate:
        # Any non-zero mantissa of at most MAX_TEXT_LENGTH digits is still far over int64 here:
        # the exact power beyond that changes nothing a saturating reader returns.
        return Fraction(10) ** min(power, _EXPONENT_LIMIT + MAX_TEXT_LENGTH)
    if power > _EXPONENT_LIMIT:
        raise InvalidObject.at(path, f"{_quoted(text)}: too large (exponent {power})")
    # Tiny exponents only matter through the nano round-up, which any value below 1e-9 hits.
    return Fraction(10) ** max(power, -_EXPONENT_LIMIT)


def _round_to_nano(value: Fraction) -> Fraction:
    """Round away from zero to a whole number of nano-units, as ParseQuantity does."""
    scaled = value * NANO
    if scaled.denominator == 1:
        return value
    magnitude = math.ceil(abs(scaled))
    return Fraction(magnitude if scaled > 0 else -magnitude, NANO)


def _quoted(text: object) -> str:
    return '"' + str(text)[:MAX_TEXT_LENGTH].replace("\\", "\\\\").replace('"', '\\"') + '"'
