"""Metric names in PromQL, for proving that every query of the monitoring overlay names a metric
the code exports. promtool parses rules but cannot list the metrics they read, hence this small
tokenizer: it drops strings, label matchers, ranges, numbers, Grafana variables, keywords,
function and aggregation names and the label lists of by/without/on/ignoring/group_*; the
identifiers left are metric names (plus any ``{__name__="…"}``).
"""

from __future__ import annotations

import re

_STRING = r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`'
_TOKEN = re.compile(
    rf"""
    (?P<string>{_STRING})
    |(?P<matchers>\{{(?:{_STRING}|[^}}"'`])*\}})
    |(?P<range>\[[^\]]*\])
    |(?P<number>0[xX][0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?:ms|[smhdwy])*)
    |(?P<variable>\$\{{[^}}]*\}}|\$\w+)
    |(?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
    |(?P<space>\s+)
    |(?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_NAME_MATCHER = re.compile(rf"__name__\s*=\s*({_STRING})")
KEYWORDS = frozenset({"and", "or", "unless", "atan2", "bool", "offset", "inf", "nan"})
LABEL_LISTS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
AGGREGATIONS = frozenset(
    {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk"}
    | {"quantile", "limitk", "limit_ratio"}
)
# Grafana's query variables: label_values(expr, label), label_values(label), query_result(expr)
_GRAFANA_CALL = re.compile(r"^\s*(label_values|query_result)\((.*)\)\s*$", re.DOTALL)


def tokens(expr: str) -> list[tuple[str, str]]:
    """(kind, text) of every token but white space."""
    out = []
    for m in _TOKEN.finditer(expr):
        kind = m.lastgroup or "other"
        if kind != "space":
            out.append((kind, m.group()))
    return out


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads."""
    toks = tokens(expr)
    names: set[str] = set()
    skip_list = skip_next = False
    depth = 0
    for i, (kind, text) in enumerate(toks):
        following = toks[i + 1][1] if i + 1 < len(toks) else ""
        if skip_list:  # inside by (...), on (...), group_left(...)
            depth += text == "("
            depth -= text == ")"
            skip_list = depth > 0
            continue
        if skip_next:
            skip_next = False
            continue
        if kind == "matchers":
            names |= {s[1:-1] for s in _NAME_MATCHER.findall(text)}
        if kind != "ident":
            continue
        word = text.lower()
        if word in LABEL_LISTS:
            skip_list, depth = following == "(", 0
        elif word == "offset":
            skip_next = True
        elif word in KEYWORDS or word in AGGREGATIONS or following == "(":
            continue
        else:
            names.add(text)
    return names


def grafana_query(query: str) -> str | None:
    """The PromQL inside a Grafana variable query (None when it reads no metric)."""
    call = _GRAFANA_CALL.match(query)
    if call is None:
        return query
    inner = call.group(2)
    if call.group(1) == "query_result":
        return inner
    head, sep, _label = inner.rpartition(",")
    return head if sep else None


def with_grafana_variables(expr: str) -> str:
    """A dashboard expression as Prometheus would receive it: macros and variables filled in."""
    expr = re.sub(r"\$__(rate_interval|interval|range)|\$\{__(rate_interval|interval|range)\}", "5m", expr)
    return re.sub(r"\$\{\w+(?::\w+)?\}|\$\w+", ".*", expr)
