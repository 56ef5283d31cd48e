"""Go's spellings, so tasgate's copies of Kueue's checks print exactly what Kueue prints.

Kueue's webhooks build ``field.Error`` values (k8s.io/apimachinery/pkg/util/validation/field) and
parse annotation values with Go's ``strconv``. This module holds faithful Python twins of the
pieces those checks use: ``field.Error`` rendering (``%q`` for string values, ``%v`` for numbers,
JSON for anything else, nothing for ``field.OmitValueType{}``), ``strconv.ParseInt/ParseUint/
ParseBool``, and ``metavalidation.ValidateLabelName`` (``content.IsLabelKey`` in current
apimachinery, whose length errors say "bytes").
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Final

from webhook.errors import FieldError

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

_NAMED_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_quote(text: str) -> str:
    """``strconv.Quote``: double quotes, Go escapes, printable runes kept as they are."""
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


def error(kind: str, path: str, detail: str = "", value: object = OMIT) -> FieldError:
    """A ``field.Error`` as Kubernetes prints it: ``<path>: <kind>[: <value>][: <detail>]``."""
    if kind in (REQUIRED, FORBIDDEN) or value is OMIT:
        return FieldError(path, detail, kind)
    rendered = go_value(value)
    return FieldError(path, f"{rendered}: {detail}" if detail else rendered, kind)


def invalid(path: str, value: object, detail: str) -> FieldError:
    return error(INVALID, path, detail, value)


def key(path: str, name: str) -> str:
    """``field.Path.Key``: ``annotations[kueue.x-k8s.io/podset-slice-size]``."""
    return f"{path}[{name}]"


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


# --- metavalidation.ValidateLabelName -------------------------------------------------------------

_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL + "(\\." + _DNS1123_LABEL + ")*"
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_KEY_RE = re.compile(_LABEL_KEY_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)


def regex_error(msg: str, fmt: str, examples: Sequence[str]) -> str:
    """apimachinery's ``RegexError`` (its odd ``',  or '`` spacing included)."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    return (
        f"{msg} (e.g. "
        + "".join((" or " if i else "") + f"'{example}', " for i, example in enumerate(examples))
        + f"regex used for validation is '{fmt}')"
    )


def _max_len(length: int) -> str:
    return f"must be no more than {length} bytes"


def label_key_errors(value: str) -> list[str]:
    """``content.IsLabelKey``: the reasons ``value`` is not a valid label key (empty if it is)."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a valid label key "
            + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, ("MyName", "my.name", "123-abc"))
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            if len(prefix.encode()) > 253:
                errs.append("prefix part " + _max_len(253))
            if not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix):
                errs.append(
                    "prefix part "
                    + regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, ("example.com",))
                )
    if not name:
        errs.append("name part must be non-empty")
    elif len(name.encode()) > 63:
        errs.append("name part " + _max_len(63))
    if not _LABEL_KEY_RE.fullmatch(name):
        errs.append(
            "name part " + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, ("MyName", "my.name", "123-abc"))
        )
    return errs


def validate_label_name(value: str, path: str) -> list[FieldError]:
    """``metavalidation.ValidateLabelName``: one "Invalid value" error per reason."""
    return [invalid(path, value, msg) for msg in label_key_errors(value)]
