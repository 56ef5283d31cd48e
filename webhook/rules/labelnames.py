"""What ``metavalidation.ValidateLabelName`` says of a label key: ``content.IsLabelKey``'s reasons,
whose length errors say "bytes" (the rules that call it make their own field errors of them)."""

from __future__ import annotations

import re
from collections.abc import Sequence

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
