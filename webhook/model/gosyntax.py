"""Go's spellings: ``strconv`` parsing, ``%q``/``%v`` printing and ``field.Error`` rendering.

Kueue parses TAS annotation values with ``strconv`` and reports problems as ``field.Error``
values (k8s.io/apimachinery/pkg/util/validation/field): ``%q`` for string values, ``%v`` for
numbers, JSON for anything else, nothing for ``field.OmitValueType{}``. The workload model (which
reads the annotations) and the rules (which print Kueue's errors) need the same twins, so they
live here, below both.
"""

from __future__ import annotations

import json
import math
import re
from typing import Final

from webhook.wire.errors import FieldError

_NAMED_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_quote(text: str) -> str:
    """``strconv.Quote``: double quotes, Go escapes, printable runes kept as they are."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'  # the common case (label keys, level names): nothing to escape
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch in _NAMED_ESCAPES:
            out.append(_NAMED_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\\ufffd")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def go_value(value: object) -> str:
    """How ``field.Error`` prints a bad value: ``%q`` strings, ``%v`` scalars, JSON otherwise."""
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    if value is None:
        return "null"
    try:
        return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def _go_float(value: float) -> str:
    """``%v`` of a float64 (strconv 'g' with the shortest repr, exponent at 21 digits)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        sign = "-" if exponent.startswith("-") else "+"
        return f"{mantissa}e{sign}{abs(int(exponent)):02d}"
    return text


# --- strconv --------------------------------------------------------------------------------------

_SIGNED = re.compile(r"[+-]?[0-9]+")
_UNSIGNED = re.compile(r"[0-9]+")
_GO_BOOLS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True}
_GO_BOOLS.update({"0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False})


def parse_int(text: str, bits: int = 32) -> int | None:
    """``strconv.ParseInt(text, 10, bits)``; None where Go returns an error."""
    if len(text) > 64 or not _SIGNED.fullmatch(text):
        return None
    value = int(text)
    limit = 1 << (bits - 1)
    return value if -limit <= value < limit else None


def parse_uint64(text: str) -> int | None:
    """``strconv.ParseUint(text, 10, 64)``; None where Go returns an error."""
    if len(text) > 64 or not _UNSIGNED.fullmatch(text):
        return None
    value = int(text)
    return value if value < 1 << 64 else None


def parse_bool(text: str) -> bool | None:
    """``strconv.ParseBool``; None where Go returns an error."""
    return _GO_BOOLS.get(text)


# --- field.Error ----------------------------------------------------------------------------------

INVALID: Final = "Invalid value"
REQUIRED: Final = "Required value"
FORBIDDEN: Final = "Forbidden"
DUPLICATE: Final = "Duplicate value"
UNSUPPORTED: Final = "Unsupported value"


class _Omit:
    """Go's ``field.OmitValueType{}``: the error prints no value."""

    def __repr__(self) -> str:
        return "OMIT"


OMIT: Final = _Omit()


def error(kind: str, path: str, detail: str = "", value: object = OMIT) -> FieldError:
    """A ``field.Error`` as Kubernetes prints it: ``<path>: <kind>[: <value>][: <detail>]``."""
    if kind in (REQUIRED, FORBIDDEN) or value is OMIT:
        return FieldError(path, detail, kind)
    rendered = go_value(value)
    return FieldError(path, f"{rendered}: {detail}" if detail else rendered, kind)


def invalid(path: str, value: object, detail: str) -> FieldError:
    return error(INVALID, path, detail, value)
