"""Quantity parsing, rounding and formatting, checked against what apimachinery does."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.model.quantity import (
    INT64_MAX,
    UNLIMITED,
    canonical,
    format_quantity,
    parse_quantity,
    quota_amount,
)
from webhook.wire.errors import InvalidObject

PATH = "spec.containers[0].resources.requests.cpu"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", Fraction(1)),
        ("0", Fraction(0)),
        ("0.5", Fraction(1, 2)),
        ("1.5", Fraction(3, 2)),
        (".5", Fraction(1, 2)),
        ("1.", Fraction(1)),
        ("007", Fraction(7)),
        ("+2", Fraction(2)),
        ("-2", Fraction(-2)),
        ("250m", Fraction(1, 4)),
        ("1n", Fraction(1, 10**9)),
        ("3u", Fraction(3, 10**6)),
        ("2k", Fraction(2000)),
        ("4M", Fraction(4 * 10**6)),
        ("1G", Fraction(10**9)),
        ("1T", Fraction(10**12)),
        ("1P", Fraction(10**15)),
        ("1Ki", Fraction(1024)),
        ("200Mi", Fraction(200 * 2**20)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("2Ti", Fraction(2 * 2**40)),
        ("1Pi", Fraction(2**50)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("2e-3", Fraction(2, 1000)),
        ("1.5e+2", Fraction(150)),
        # Below one nano-unit, Kubernetes rounds up rather than to zero.
        ("0.1n", Fraction(1, 10**9)),
        ("1e-12", Fraction(1, 10**9)),
        ("-1e-12", Fraction(-1, 10**9)),
        (4, Fraction(4)),
        (0.5, Fraction(1, 2)),
        (0.1, Fraction(1, 10)),
        (1e-05, Fraction(1, 100000)),
    ],
)
def test_parses_every_form(text: str | int | float, expected: Fraction) -> None:
    assert parse_quantity(text, PATH) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("12x", 'unknown suffix "x"'),
        ("1K", 'unknown suffix "K"'),
        ("1ki", 'unknown suffix "ki"'),
        ("1e", 'unknown suffix "e"'),
        ("", "must not be empty"),
        ("   ", "leading or trailing spaces"),
        ("  3  ", "leading or trailing spaces"),
        ("3\n", "leading or trailing spaces"),
        ("1.2.3", "not a quantity"),
        ("1 Gi", "not a quantity"),
        ("Gi", "must start with a number"),
        ("m", "must start with a number"),
        (".", "must start with a number"),
        ("-", "must start with a number"),
        ("1" * 101, "longer than 100 characters"),
        ("9Ei", "too large"),
        ("1e40", "too large"),
        ("1e999999999", "too large"),
        (2**70, "too large"),
        (float("inf"), "finite"),
        (float("nan"), "finite"),
        (True, "must be a quantity string"),
        (None, "must be a quantity string"),
        ([1], "must be a quantity string"),
    ],
)
def test_rejects_malformed_with_field_path(text: object, fragment: str) -> None:
    with pytest.raises(InvalidObject) as caught:
        parse_quantity(text, PATH)  # type: ignore[arg-type]
    message = str(caught.value)
    assert message.startswith(f"{PATH}: Invalid value: ")
    assert fragment in message


def test_largest_accepted_value_fits_int64_in_milli_units() -> None:
    # 8Pi bytes is within the bound; its milli-units still fit the scorer's int64 arrays.
    assert canonical("cpu", parse_quantity("8Pi", PATH)) <= INT64_MAX


def test_the_int64_limit_is_on_the_counted_unit() -> None:
    """Memory is counted in bytes, cpu in milli-units: 10Pi of memory is a valid request (the
    API server takes it), 10P of cpu is not countable."""
    assert canonical("memory", parse_quantity("10Pi", PATH)) == 10 * 2**50
    with pytest.raises(InvalidObject, match="too large"):
        canonical("cpu", parse_quantity("10P", PATH), PATH)


@pytest.mark.parametrize(
    ("resource", "text", "expected"),
    [
        ("cpu", "1", 1000),
        ("cpu", "100m", 100),
        ("cpu", "0.5", 500),
        ("cpu", "1n", 1),  # MilliValue rounds up
        ("cpu", "1500001n", 2),
        ("cpu", "-1n", -1),  # away from zero, like Quantity.RoundUp
        ("memory", "200Mi", 200 * 2**20),
        ("memory", "1.5", 2),  # Value rounds up
        ("memory", "1500m", 2),
        ("nvidia.com/gpu", "0.1", 1),
        ("nvidia.com/gpu", "8", 8),
        ("ephemeral-storage", "1e3", 1000),
    ],
)
def test_canonical_rounds_up(resource: str, text: str, expected: int) -> None:
    assert canonical(resource, parse_quantity(text, PATH)) == expected


@pytest.mark.parametrize(
    ("resource", "amount", "expected"),
    [
        ("cpu", 500, "500m"),
        ("cpu", 2000, "2"),
        ("cpu", 1500, "1500m"),
        ("cpu", 0, "0"),
        ("memory", 2 * 2**30, "2Gi"),
        ("memory", 1536 * 2**20, "1536Mi"),
        ("memory", 3 * 2**40, "3Ti"),
        ("memory", 4096, "4Ki"),
        ("memory", 1000, "1000"),
        ("memory", 0, "0"),
        ("hugepages-2Mi", 4 * 2**20, "4Mi"),
        ("nvidia.com/gpu", 8, "8"),
        ("pods", 1024, "1024"),
    ],
)
def test_format_is_compact(resource: str, amount: int, expected: str) -> None:
    assert format_quantity(resource, amount) == expected


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["", "m", "k", "Ki", "Mi", "Gi", "e2"]))
def test_integer_mantissa_times_suffix(mantissa: int, suffix: str) -> None:
    scale: dict[str, Fraction] = {"": Fraction(1), "m": Fraction(1, 1000), "k": Fraction(1000)}
    scale.update(Ki=Fraction(1024), Mi=Fraction(2**20), Gi=Fraction(2**30), e2=Fraction(100))
    assert parse_quantity(f"{mantissa}{suffix}", PATH) == mantissa * scale[suffix]


@given(st.sampled_from(["cpu", "memory", "hugepages-1Gi", "nvidia.com/gpu"]), st.integers(0, 2**53))
def test_format_round_trips_through_parse(resource: str, amount: int) -> None:
    assert canonical(resource, parse_quantity(format_quantity(resource, amount), PATH)) == amount


@given(st.integers(min_value=-(10**15), max_value=10**15), st.integers(min_value=0, max_value=9))
def test_decimal_text_is_exact(whole: int, digits: int) -> None:
    text = f"{whole}.{'3' * digits}" if digits else str(whole)
    value = parse_quantity(text, PATH)
    magnitude = abs(whole) + (Fraction(int("3" * digits), 10**digits) if digits else 0)
    assert value == (magnitude if whole >= 0 else -magnitude)


# --- ClusterQueue quotas: what Kueue v0.19.2's AmountFromQuantity makes of them ---------------

QUOTA = "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
CPU_BOUND = INT64_MAX // 1000  # maxCPUQuantityForAmount, in cores


@pytest.mark.parametrize(
    ("resource", "text", "expected"),
    [
        ("cpu", "1E", UNLIMITED),  # apimachinery's MilliValue() is 0 here: Kueue saturates instead
        ("cpu", str(CPU_BOUND), UNLIMITED),  # the bound itself is Unlimited (Cmp >= 0)
        ("cpu", f"{CPU_BOUND - 1}999m", (CPU_BOUND - 1) * 1000 + 999),  # one milli-CPU below it
        ("cpu", "1e30", UNLIMITED),  # beyond int64: decimal quantities are not capped upstream
        ("cpu", "1e999", UNLIMITED),
        ("cpu", "0e999", 0),
        ("cpu", 10**30, UNLIMITED),
        ("cpu", "10", 10_000),
        ("cpu", "1.5m", 2),  # rounds up, as MilliValue does
        ("memory", "1E", 10**18),  # fits int64 as bytes
        ("memory", "16Ei", UNLIMITED),
        ("memory", str(INT64_MAX), UNLIMITED),
        ("memory", str(INT64_MAX - 1), INT64_MAX - 1),
        ("nvidia.com/gpu", "0", 0),
    ],
)
def test_quota_amounts_saturate_as_kueue_does(resource: str, text: str | int, expected: int) -> None:
    assert quota_amount(resource, text, QUOTA) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-1", '"-1": must be greater than or equal to 0'),  # Kueue's webhook refuses it
        ("lots", '"lots": must start with a number, as in 500m or 2Gi'),
        ("1Zi", '"1Zi": unknown suffix "Zi"'),
    ],
)
def test_quota_amounts_kueue_refuses_name_the_field(text: str, message: str) -> None:
    with pytest.raises(InvalidObject) as caught:
        quota_amount("cpu", text, QUOTA)
    assert str(caught.value).startswith(f"{QUOTA}: Invalid value: {message}")


def test_requests_stay_bounded_by_int64() -> None:
    """Only quotas saturate: a request or an allocatable amount beyond int64 is still refused."""
    with pytest.raises(InvalidObject, match="too large"):
        parse_quantity("1e30", PATH)
    with pytest.raises(InvalidObject, match="too large"):
        canonical("cpu", parse_quantity("1E", PATH), PATH)
