"""Go's ``json.Unmarshal`` into ``[]kueue.PodsetSliceRequiredTopologyConstraint``, errors included.

Kueue rejects a bad ``podset-slice-required-topology-constraints`` annotation with
``must be a valid JSON array: <err>``, where ``<err>`` is encoding/json's own text. To print the
same words this module replays what Go does: a syntax pass with the scanner's messages
(``invalid character 'x' looking for beginning of value``, ``unexpected end of JSON input`` …),
then the typed decode into ``[]struct{Topology string; Size int32}``, which keeps going after a
type mismatch and reports the first one (``json: cannot unmarshal string into Go struct field
PodsetSliceRequiredTopologyConstraint.size of type int32``). Keys match fields case-insensitively
and unknown keys are ignored, as in Go.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from webhook.model.gosyntax import go_quote, parse_int

_ELEMENT_TYPE = "v1beta2.PodsetSliceRequiredTopologyConstraint"
_STRUCT = "PodsetSliceRequiredTopologyConstraint"
_MAX_DEPTH = 10000
_EOF = "unexpected end of JSON input"
_SPACE = b" \t\r\n"
_DIGITS = b"0123456789"
_HEX = b"0123456789abcdefABCDEF"
_LITERALS = {ord("t"): b"true", ord("f"): b"false", ord("n"): b"null"}


MAX_LAYERS = 3  # TASMultiLayerTopology: one to three layers, coarse to fine


@dataclass(frozen=True)
class Layer:
    """One decoded constraint; Go's zero values stand in for absent or null fields."""

    topology: str
    size: int


class _Num(str):
    """A JSON number kept as its literal text, as Go's decoder sees it."""


class _Obj(list[tuple[str, object]]):
    """A JSON object as its key/value pairs in order, duplicates kept."""


def _quote_char(c: int) -> str:
    if c == ord("'"):
        return "'\\''"
    if c == ord('"'):
        return "'\"'"
    return "'" + go_quote(chr(c))[1:-1] + "'"


def _bad(c: int, context: str) -> str:
    return f"invalid character {_quote_char(c)} {context}"


def syntax_error(data: bytes) -> str | None:
    """The message of Go's ``checkValid`` for ``data``, or None when it is valid JSON."""
    n, i, stack, state = len(data), 0, bytearray(), "value"
    while True:
        while i < n and data[i] in _SPACE:
            i += 1
        if i >= n:
            return None if state == "after" and not stack else _EOF
        c = data[i]
        if state in ("value", "value_or_end"):
            if state == "value_or_end" and c == ord("]"):
                stack.pop()
                i, state = i + 1, "after"
            elif c in (ord("{"), ord("[")):
                stack.append(c)
                if len(stack) > _MAX_DEPTH:
                    return _bad(c, "exceeded max depth")
                i, state = i + 1, ("key_or_end" if c == ord("{") else "value_or_end")
            else:
                i, err = _scan_scalar(data, i)
                if err:
                    return err
                state = "after"
        elif state in ("key", "key_or_end"):
            if state == "key_or_end" and c == ord("}"):
                stack.pop()
                i, state = i + 1, "after"
            elif c == ord('"'):
                i, err = _scan_string(data, i + 1)
                if err:
                    return err
                state = "colon"
            else:
                return _bad(c, "looking for beginning of object key string")
        elif state == "colon":
            if c != ord(":"):
                return _bad(c, "after object key")
            i, state = i + 1, "value"
        elif not stack:
            return _bad(c, "after top-level value")
        elif c == ord(","):
            i, state = i + 1, ("value" if stack[-1] == ord("[") else "key")
        elif c == (ord("]") if stack[-1] == ord("[") else ord("}")):
            stack.pop()
            i += 1
        else:
            return _bad(c, "after array element" if stack[-1] == ord("[") else "after object key:value pair")


def _scan_scalar(data: bytes, i: int) -> tuple[int, str | None]:
    c = data[i]
    if c == ord('"'):
        return _scan_string(data, i + 1)
    if c == ord("-") or c in _DIGITS:
        return _scan_number(data, i)
    literal = _LITERALS.get(c)
    if literal is None:
        return i, _bad(c, "looking for beginning of value")
    for j, expected in enumerate(literal[1:], start=1):
        if i + j >= len(data):
            return i, _EOF
        if data[i + j] != expected:
            return i, _bad(data[i + j], f"in literal {literal.decode()} (expecting {_quote_char(expected)})")
    return i + len(literal), None


def _scan_string(data: bytes, i: int) -> tuple[int, str | None]:
    n = len(data)
    while i < n:
        c = data[i]
        if c == ord('"'):
            return i + 1, None
        if c == ord("\\"):
            i += 1
            if i >= n:
                return i, _EOF
            if data[i] == ord("u"):
                for _ in range(4):
                    i += 1
                    if i >= n:
                        return i, _EOF
                    if data[i] not in _HEX:
                        return i, _bad(data[i], "in \\u hexadecimal character escape")
            elif data[i] not in b'bfnrt\\/"':
                return i, _bad(data[i], "in string escape code")
        elif c < 0x20:
            return i, _bad(c, "in string literal")
        i += 1
    return i, _EOF


def _scan_number(data: bytes, i: int) -> tuple[int, str | None]:
    n = len(data)

    def digits(j: int) -> int:
        while j < n and data[j] in _DIGITS:
            j += 1
        return j

    if data[i] == ord("-"):
        i += 1
        if i >= n:
            return i, _EOF
        if data[i] not in _DIGITS:
            return i, _bad(data[i], "in numeric literal")
    i = i + 1 if data[i] == ord("0") else digits(i)
    if i < n and data[i] == ord("."):
        i += 1
        if i >= n:
            return i, _EOF
        if data[i] not in _DIGITS:
            return i, _bad(data[i], "after decimal point in numeric literal")
        i = digits(i)
    if i < n and data[i] in b"eE":
        i += 1
        if i < n and data[i] in b"+-":
            i += 1
        if i >= n:
            return i, _EOF
        if data[i] not in _DIGITS:
            return i, _bad(data[i], "in exponent of numeric literal")
        i = digits(i)
    return i, None


def _kind(value: object) -> str:
    """The word encoding/json uses for a JSON value of the wrong type."""
    if isinstance(value, _Obj):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, _Num):
        return "number"
    if isinstance(value, bool):
        return "bool"
    return "string"


def decode_constraints(text: str) -> tuple[list[Layer], str | None]:
    """Go's ``json.Unmarshal`` of ``text``: the layers it fills and its error text (or None)."""
    err = syntax_error(text.encode())
    if err is not None:
        return [], err
    try:
        value = json.loads(text, parse_int=_Num, parse_float=_Num, object_pairs_hook=_Obj)
    except (RecursionError, ValueError):
        return [], "exceeded max depth"
    if value is None:
        return [], None
    if not isinstance(value, list) or isinstance(value, _Obj):
        return [], f"json: cannot unmarshal {_kind(value)} into Go value of type []{_ELEMENT_TYPE}"
    first: str | None = None
    layers = []
    for element in value:
        layer, problem = _decode_layer(element)
        layers.append(layer)
        first = first or problem
    return layers, first


def _decode_layer(element: object) -> tuple[Layer, str | None]:
    if element is None:
        return Layer("", 0), None
    if not isinstance(element, _Obj):
        return Layer("", 0), f"json: cannot unmarshal {_kind(element)} into Go value of type {_ELEMENT_TYPE}"
    topology, size, first = "", 0, None
    for name, item in element:
        field = name.lower()
        if item is None or field not in ("topology", "size"):
            continue
        problem: str | None = None
        if field == "topology":
            if isinstance(item, str) and not isinstance(item, _Num):
                topology = item
            else:
                problem = _field_error(_kind(item), "topology", "string")
        elif isinstance(item, _Num):
            parsed = parse_int(str(item), 32)
            if parsed is None:
                problem = _field_error(f"number {item}", "size", "int32")
            else:
                size = parsed
        else:
            problem = _field_error(_kind(item), "size", "int32")
        first = first or problem
    return Layer(topology, size), first


def _field_error(value: str, field: str, go_type: str) -> str:
    return f"json: cannot unmarshal {value} into Go struct field {_STRUCT}.{field} of type {go_type}"


@dataclass(frozen=True)
class Constraints:
    """The slice-constraints annotation of one PodSet, decoded once for every reader."""

    layers: tuple[Layer, ...]
    error: str | None  # encoding/json's own text, or None when it decoded

    @property
    def layer_count_ok(self) -> bool:
        return 1 <= len(self.layers) <= MAX_LAYERS

    @property
    def usable(self) -> bool:
        """Decoded, with an allowed number of layers: what placement may read."""
        return self.error is None and self.layer_count_ok


def parse_constraints(text: str) -> Constraints:
    layers, err = decode_constraints(text)
    return Constraints(tuple(layers), err)
