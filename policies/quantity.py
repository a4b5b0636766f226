"""Kubernetes resource quantities (`500m`, `1.5Gi`, `1e3`), parsed to exact decimal values.

Why not floats: `limits >= requests` must agree with the API server to the last digit
(`1G` > `953Mi` but `1G` < `954Mi`; `0.1` + `0.2` style rounding would flip such verdicts), and
quantities may be astronomically large (`1e2147483647` is syntactically valid). A `Decimal` in a
context with maximal precision and exponent range multiplies and compares such values exactly
and cheaply, where a `Fraction` would materialise a billion-digit integer.

The grammar is apimachinery's `resource.Quantity` (k8s.io/apimachinery/pkg/api/resource):

    <quantity>        ::= <signedNumber><suffix>
    <signedNumber>    ::= <number> | <sign><number>
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <sign>            ::= "+" | "-"
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedInteger> | "E" <signedInteger>

(`E` alone is exa; `E` followed by a signed integer is an exponent.) JSON/YAML numbers are also
accepted, as the API server accepts `cpu: 1` and `cpu: 0.5` for int-or-string fields; booleans
are not quantities. Limits of this module: it does not reproduce the API server's rounding of
sub-nano values or its capping of values beyond int64 — it only decides validity and order.
"""

from __future__ import annotations

import re
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal, InvalidOperation
from functools import lru_cache

__all__ = ["FORMAT_HINT", "QuantityError", "parse_quantity"]

_CONTEXT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)

_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<binary>[KMGTPE]i)|[eE](?P<exponent>[+-]?[0-9]+)|(?P<decimal>[numkMGTPE]?))"
)

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}

# apimachinery parses the exponent with strconv.ParseInt(…, 10, 32).
_INT32_MAX = 2**31 - 1

FORMAT_HINT = "a quantity such as 500m, 2, 1.5Gi, 100M or 1e3"


class QuantityError(ValueError):
    """The value is not a Kubernetes quantity; the message says why."""


def parse_quantity(value: object) -> Decimal:
    """The exact value of a quantity (a string, or an int/float as YAML gives them).

    Raises `QuantityError` for anything else; callers turn that into a field error.
    """
    if isinstance(value, bool) or value is None:
        raise QuantityError(f"must be {FORMAT_HINT}")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(f"must be {FORMAT_HINT}")
        # repr gives the shortest decimal that round-trips: what the user wrote in YAML.
        return Decimal(repr(value))
    if not isinstance(value, str):
        raise QuantityError(f"must be {FORMAT_HINT}")
    return _parse_string(value)


@lru_cache(maxsize=1024)
def _parse_string(value: str) -> Decimal:
    """Cached: a cluster's jobs repeat the same few dozen quantities (`500m`, `1Gi`, …)."""
    match = _QUANTITY.fullmatch(value)
    if match is None:
        raise QuantityError(f"must be {FORMAT_HINT}")
    number = Decimal(match["number"])
    if match["binary"] is not None:
        return _CONTEXT.multiply(number, Decimal(_BINARY[match["binary"]]))
    if match["exponent"] is not None:
        exponent = int(match["exponent"])
        if abs(exponent) > _INT32_MAX:
            raise QuantityError("exponent is out of range")
    else:
        exponent = _DECIMAL[match["decimal"]]
    try:
        return _CONTEXT.scaleb(number, exponent)
    except InvalidOperation as e:  # pragma: no cover - exponent range is checked above
        raise QuantityError("is out of range") from e
