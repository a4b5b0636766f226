"""The Kubernetes CEL libraries that CRD rules commonly use, as cel-python functions.

A real API server evaluates `x-kubernetes-validations` with cel-go plus Kubernetes' libraries;
cel-python only has standard CEL. Without these, a rule such as
`self.name.lowerAscii() == self.name` would fail on every object here while passing on a real
cluster. Implemented (receiver-style calls work because cel-python passes the receiver as the
first argument):

* strings: `charAt`, `indexOf`, `lastIndexOf`, `lowerAscii`, `upperAscii`, `replace`, `split`,
  `substring`, `trim`, and `join` on lists of strings;
* lists: `isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`;
* regex: `find`, `findAll`;
* quantity: `quantity(s)`, `isQuantity(s)` and on quantities `isInteger`, `asInteger`,
  `asApproximateFloat`, `sign`, `add`, `sub`, `isGreaterThan`, `isLessThan`, `compareTo`
  (exact decimal arithmetic; equality by value).

* optionals, as far as `optionalOldSelf` needs them: `hasValue`, `value`, `orValue`.

Not implemented: `url`, `ip`/`cidr`, `format`, `authorizer`, other optional-type functions.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from celpy import celtypes

__all__ = ["FUNCTIONS", "Optional", "Quantity"]


class CelFunctionError(ValueError):
    """A library function called with arguments it does not accept."""


# --------------------------------------------------------------------------- quantity

_SUFFIX = {
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
    "Pi": Decimal(2**50), "Ei": Decimal(2**60), "n": Decimal("1e-9"), "u": Decimal("1e-6"),
    "m": Decimal("1e-3"), "": Decimal(1), "k": Decimal("1e3"), "M": Decimal("1e6"),
    "G": Decimal("1e9"), "T": Decimal("1e12"), "P": Decimal("1e15"), "E": Decimal("1e18"),
}  # fmt: skip
_QUANTITY = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$"
)


class Quantity:
    """A Kubernetes resource quantity as an exact decimal (`quantity("1.5Gi")`)."""

    __slots__ = ("text", "value")

    def __init__(self, text: str) -> None:
        m = _QUANTITY.match(text.strip())
        if not m:
            raise CelFunctionError(f"quantities must match the regular expression: {text!r}")
        number, suffix = m.group(1), m.group(2) or ""
        try:
            base = Decimal(number)
        except InvalidOperation as e:
            raise CelFunctionError(f"invalid quantity {text!r}") from e
        if len(suffix) > 1 and suffix[:1] in ("e", "E"):  # an exponent, not the Exa suffix "E"
            self.value = base * (Decimal(10) ** int(suffix[1:]))
        else:
            self.value = base * _SUFFIX[suffix]
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"Quantity({self.text!r})"


def _quantity(value: Any) -> Quantity:
    if isinstance(value, Quantity):
        return value
    if isinstance(value, str):
        return Quantity(value)
    raise CelFunctionError(f"no such overload: quantity({type(value).__name__})")


def _is_quantity(value: Any) -> celtypes.BoolType:
    try:
        _quantity(value)
    except CelFunctionError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _operand(value: Any) -> Decimal:
    if isinstance(value, Quantity):
        return value.value
    if isinstance(value, int) and not isinstance(value, bool):
        return Decimal(int(value))
    raise CelFunctionError("no such overload for quantity arithmetic")


def _from_decimal(value: Decimal) -> Quantity:
    q = Quantity("0")
    q.value = value
    q.text = format(value.normalize(), "f")
    return q


# --------------------------------------------------------------------------- optionals


class Optional:
    """A CEL optional value (what `oldSelf` is for rules with `optionalOldSelf: true`)."""

    __slots__ = ("inner",)

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Optional) and self.inner == other.inner

    def __hash__(self) -> int:
        return hash(repr(self.inner))


def _has_value(target: Any) -> celtypes.BoolType:
    if not isinstance(target, Optional):
        raise CelFunctionError("hasValue: no such overload")
    return celtypes.BoolType(target.inner is not None)


def _value(target: Any) -> Any:
    if not isinstance(target, Optional) or target.inner is None:
        raise CelFunctionError("optional.none() dereference")
    return target.inner


def _or_value(target: Any, default: Any) -> Any:
    if not isinstance(target, Optional):
        raise CelFunctionError("orValue: no such overload")
    return default if target.inner is None else target.inner


# --------------------------------------------------------------------------- strings and lists


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise CelFunctionError(f"expected a string, got {type(value).__name__}")
    return str(value)


def _index_of(target: Any, item: Any, start: Any = None) -> celtypes.IntType:
    if isinstance(target, str):
        return celtypes.IntType(_str(target).find(_str(item), int(start or 0)))
    if isinstance(target, list):
        return celtypes.IntType(next((i for i, v in enumerate(target) if v == item), -1))
    raise CelFunctionError("indexOf: no such overload")


def _last_index_of(target: Any, item: Any) -> celtypes.IntType:
    if isinstance(target, str):
        return celtypes.IntType(_str(target).rfind(_str(item)))
    if isinstance(target, list):
        hits = [i for i, v in enumerate(target) if v == item]
        return celtypes.IntType(hits[-1] if hits else -1)
    raise CelFunctionError("lastIndexOf: no such overload")


def _substring(target: Any, start: Any, end: Any = None) -> celtypes.StringType:
    text = _str(target)
    lo, hi = int(start), len(text) if end is None else int(end)
    if not 0 <= lo <= hi <= len(text):
        raise CelFunctionError(f"substring: index out of range: {lo}, {hi}")
    return celtypes.StringType(text[lo:hi])


def _split(target: Any, sep: Any, limit: Any = None) -> celtypes.ListType:
    text, separator = _str(target), _str(sep)
    if limit is not None and int(limit) == 0:
        return celtypes.ListType([])
    maxsplit = -1 if limit is None or int(limit) < 0 else int(limit) - 1
    parts = list(text) if separator == "" else text.split(separator, maxsplit)
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


def _join(target: Any, sep: Any = "") -> celtypes.StringType:
    if not isinstance(target, list):
        raise CelFunctionError("join: no such overload")
    return celtypes.StringType(_str(sep).join(_str(v) for v in target))


def _is_sorted(target: Any) -> celtypes.BoolType:
    items = list(target)
    return celtypes.BoolType(all(items[i] <= items[i + 1] for i in range(len(items) - 1)))


def _sum(target: Any) -> Any:
    items = list(target)
    if not items:
        return celtypes.IntType(0)
    total = items[0]
    for item in items[1:]:
        total = total + item
    return total


def _extreme(pick: Callable[[list[Any]], Any]) -> Callable[..., Any]:
    def fn(*args: Any) -> Any:
        items = list(args[0]) if len(args) == 1 and isinstance(args[0], list) else list(args)
        if not items:
            raise CelFunctionError("min/max called on an empty list")
        return pick(items)

    return fn


def _find(target: Any, pattern: Any) -> celtypes.StringType:
    m = re.search(_str(pattern), _str(target))
    return celtypes.StringType(m.group(0) if m else "")


def _find_all(target: Any, pattern: Any, limit: Any = None) -> celtypes.ListType:
    hits = [m.group(0) for m in re.finditer(_str(pattern), _str(target))]
    if limit is not None and int(limit) >= 0:
        hits = hits[: int(limit)]
    return celtypes.ListType([celtypes.StringType(h) for h in hits])


def _compare(a: Any, b: Any) -> int:
    x, y = _quantity(a).value, _quantity(b).value
    return (x > y) - (x < y)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "charAt": lambda s, i: celtypes.StringType(_str(s)[int(i)] if int(i) < len(_str(s)) else ""),
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "lowerAscii": lambda s: celtypes.StringType(_str(s).lower()),
    "upperAscii": lambda s: celtypes.StringType(_str(s).upper()),
    "replace": lambda s, old, new, n=None: celtypes.StringType(
        _str(s).replace(_str(old), _str(new), -1 if n is None else int(n))
    ),
    "split": _split,
    "substring": _substring,
    "trim": lambda s: celtypes.StringType(_str(s).strip()),
    "join": _join,
    "isSorted": _is_sorted,
    "sum": _sum,
    "min": _extreme(min),
    "max": _extreme(max),
    "find": _find,
    "findAll": _find_all,
    "hasValue": _has_value,
    "value": _value,
    "orValue": _or_value,
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "isInteger": lambda q: celtypes.BoolType(
        _quantity(q).value == _quantity(q).value.to_integral()
    ),
    "asInteger": lambda q: celtypes.IntType(int(_quantity(q).value)),
    "asApproximateFloat": lambda q: celtypes.DoubleType(float(_quantity(q).value)),
    "sign": lambda q: celtypes.IntType((_quantity(q).value > 0) - (_quantity(q).value < 0)),
    "add": lambda q, other: _from_decimal(_quantity(q).value + _operand(other)),
    "sub": lambda q, other: _from_decimal(_quantity(q).value - _operand(other)),
    "isGreaterThan": lambda a, b: celtypes.BoolType(_compare(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_compare(a, b) < 0),
    "compareTo": lambda a, b: celtypes.IntType(_compare(a, b)),
}
