"""Kubernetes quantity parsing: exact values, the full suffix grammar, and clear rejections."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies.quantity import QuantityError, parse_quantity

EXACT_VALUES = {
    "plain integer": ("2", Decimal(2)),
    "milli": ("500m", Decimal("0.5")),
    "decimal fraction": ("0.5", Decimal("0.5")),
    "leading dot": (".5", Decimal("0.5")),
    "trailing dot": ("5.", Decimal(5)),
    "nano": ("1n", Decimal("1e-9")),
    "micro": ("3u", Decimal("3e-6")),
    "kilo with fraction": ("1.5k", Decimal(1500)),
    "mega": ("100M", Decimal(100_000_000)),
    "giga": ("1G", Decimal(10**9)),
    "tera": ("2T", Decimal(2 * 10**12)),
    "peta": ("1P", Decimal(10**15)),
    "exa suffix alone": ("1E", Decimal(10**18)),
    "kibi": ("1Ki", Decimal(1024)),
    "mebi": ("953Mi", Decimal(953 * 2**20)),
    "gibi": ("1Gi", Decimal(1073741824)),
    "fractional gibi": ("1.5Gi", Decimal(1610612736)),
    "tebi": ("1Ti", Decimal(2**40)),
    "pebi": ("1Pi", Decimal(2**50)),
    "exbi": ("1Ei", Decimal(2**60)),
    "lower-case exponent": ("1e3", Decimal(1000)),
    "upper-case exponent": ("1E3", Decimal(1000)),
    "negative exponent": ("5e-1", Decimal("0.5")),
    "explicit positive exponent": ("2e+2", Decimal(200)),
    "explicit plus sign": ("+2Ki", Decimal(2048)),
    "negative number": ("-1", Decimal(-1)),
    "huge exponent stays exact": ("1e2147483647", Decimal("1e2147483647")),
    "yaml integer": (4, Decimal(4)),
    "yaml float": (0.1, Decimal("0.1")),
}

MALFORMED = {
    "empty string": "",
    "lone dot": ".",
    "exponent without digits": "1e",
    "lower-case kilo binary": "1ki",
    "upper-case binary suffix": "1KI",
    "space before suffix": "1 Gi",
    "leading space": " 1",
    "trailing newline": "1\n",
    "two dots": "1.5.2",
    "suffix without number": "Mi",
    "exponent without mantissa": "e3",
    "digits after binary suffix": "1Ki3",
    "fractional exponent": "1e1.5",
    "non-ascii digit": "\u0663",
    "unknown suffix": "1x",
    "exponent beyond int32": "1e2147483648",
    "boolean": True,
    "null": None,
    "list": [1],
    "object": {"cpu": 1},
    "not a number float": float("nan"),
    "infinite float": float("inf"),
}


@pytest.mark.parametrize(("text", "expected"), list(EXACT_VALUES.values()), ids=list(EXACT_VALUES))
def test_quantities_parse_to_their_exact_value(text: object, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("text", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_quantities_are_rejected_with_a_hint(text: object) -> None:
    with pytest.raises(QuantityError, match=r"quantity|range"):
        parse_quantity(text)


ORDERINGS = {
    "1G is more than 953Mi": ("1G", "953Mi"),
    "954Mi is more than 1G": ("954Mi", "1G"),
    "1Ki is more than 1k": ("1Ki", "1k"),
    "1 is more than 999m": ("1", "999m"),
    "1m is more than 999999n": ("1m", "999999n"),
    "1e3 is more than 999": ("1e3", "999"),
}


@pytest.mark.parametrize(("larger", "smaller"), list(ORDERINGS.values()), ids=list(ORDERINGS))
def test_quantities_compare_exactly_across_suffixes(larger: str, smaller: str) -> None:
    assert parse_quantity(larger) > parse_quantity(smaller)


def test_equal_quantities_in_different_notations_compare_equal() -> None:
    assert len({parse_quantity(q) for q in ("500m", "0.5", ".5", "5e-1", "500000u")}) == 1


@given(st.integers(min_value=0, max_value=10**12))
def test_an_integer_and_its_string_form_are_the_same_quantity(n: int) -> None:
    assert parse_quantity(n) == parse_quantity(str(n))


@given(st.text(max_size=20))
def test_parsing_arbitrary_text_returns_a_value_or_raises_quantity_error(text: str) -> None:
    try:
        value = parse_quantity(text)
    except QuantityError:
        return
    assert value.is_finite()
