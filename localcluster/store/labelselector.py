"""The label selector string grammar, parsed as apimachinery's `labels.Parse` (v1.32) parses it,
so that a selector that does not parse is refused with the words kube-apiserver uses.

A lexer splits the text into identifiers (`in` and `notin` are keywords in operator position
only), the operators `!`, `=`, `==`, `!=`, `>`, `<`, and `(`, `)`, `,`; a recursive-descent
parser reads `[!]key [op value | in|notin (values)]` requirements separated by commas. Errors:

* a token out of place: `found 'b', expected: ',' or 'end of string'` (inside a requirement
  prefixed `unable to parse requirement: `);
* a bad key, checked as it is read (no field path: `<nil>: Invalid value: "-a": name part …`);
* the requirement's own checks (`values[0]: Invalid value: "x": for 'Gt', 'Lt' operators, the
  value must be an integer`, `values[0][app]: Invalid value: "-x": a valid label must be …`),
  several at once as `[first, second]`.

Pure functions; `selectors.parse_label_selector` turns the result into requirements.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

__all__ = ["LabelSelectorError", "Parsed", "is_qualified_name", "is_valid_label_value", "parse"]


class LabelSelectorError(ValueError):
    """A label selector that does not parse; the message is kube-apiserver's."""


@dataclass(frozen=True)
class Parsed:
    key: str
    op: str  # "!", "exists", "=", "==", "!=", "in", "notin", ">", "<"
    values: tuple[str, ...] = ()


# --- validation (apimachinery's util/validation wording) -------------------------------------

_QNAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME_RE = re.compile(_QNAME + r"\Z")
_LABEL_VALUE_RE = re.compile(f"({_QNAME})?" + r"\Z")
_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_SUBDOMAIN_RE = re.compile(_SUBDOMAIN + r"\Z")
_QNAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)


def _regex_error(message: str, pattern: str, *examples: str) -> str:
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


def is_qualified_name(value: str) -> list[str]:
    """What is wrong with a label key (`[prefix/]name`); empty when it is fine."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a qualified name "
            + _regex_error(_QNAME_MSG, _QNAME, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errors.append("prefix part must be no more than 253 characters")
            if not _SUBDOMAIN_RE.match(prefix):
                errors.append(
                    "prefix part "
                    + _regex_error(
                        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                        "characters, '-' or '.', and must start and end with an alphanumeric "
                        "character",
                        _SUBDOMAIN,
                        "example.com",
                    )
                )
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if not _QNAME_RE.match(name):
        errors.append(
            "name part " + _regex_error(_QNAME_MSG, _QNAME, "MyName", "my.name", "123-abc")
        )
    return errors


def is_valid_label_value(value: str) -> list[str]:
    errors: list[str] = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if not _LABEL_VALUE_RE.match(value):
        errors.append(
            _regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character",
                f"({_QNAME})?",
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errors


def _invalid(path: str, value: str, errors: list[str]) -> str:
    return f"{path}: Invalid value: {json.dumps(value)}: {'; '.join(errors)}"


# --- lexer -----------------------------------------------------------------------------------

_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_OPERATORS = ("!=", "==", "=", "!", "(", ")", ",", ">", "<")
_END = ("end", "")
Token = tuple[str, str]  # (kind, literal); kinds: "id", "in", "notin", an operator, "end", "error"


def _lex(text: str) -> list[Token]:
    tokens: list[Token] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= len(text):
            tokens.append(_END)
            return tokens
        if text[pos] in _SPECIAL:
            # The longest run of special characters that is an operator, one at a time.
            end, found = pos, ""
            while end < len(text) and text[end] in _SPECIAL:
                if text[pos : end + 1] in _OPERATORS:
                    found = text[pos : end + 1]
                elif found:
                    break
                end += 1
            if not found:
                tokens.append(("error", f"error expected: keyword found '{text[pos:end]}'"))
                pos = end
            else:
                tokens.append((found, found))
                pos += len(found)
            continue
        end = pos
        while end < len(text) and text[end] not in _SPECIAL and text[end] not in _WHITESPACE:
            end += 1
        word = text[pos:end]
        tokens.append((word if word in ("in", "notin") else "id", word))
        pos = end


# --- parser ----------------------------------------------------------------------------------

_BINARY = "in, notin, =, ==, !=, gt, lt"


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _lex(text)
        self.pos = 0

    def peek(self, values: bool = True) -> Token:
        return self._as(self.tokens[min(self.pos, len(self.tokens) - 1)], values)

    def take(self, values: bool = True) -> Token:
        token = self.peek(values)
        self.pos += 1
        return token

    @staticmethod
    def _as(token: Token, values: bool) -> Token:
        """In value position the keywords `in` and `notin` are identifiers."""
        return ("id", token[1]) if values and token[0] in ("in", "notin") else token

    def parse(self) -> list[Parsed]:
        out: list[Parsed] = []
        while True:
            kind, literal = self.peek()
            if kind == "end":
                return out
            if kind not in ("id", "!"):
                raise LabelSelectorError(
                    f"found '{literal}', expected: !, identifier, or 'end of string'"
                )
            try:
                out.append(self.requirement())
            except LabelSelectorError as e:
                raise LabelSelectorError(f"unable to parse requirement: {e}") from None
            kind, literal = self.take()
            if kind == "end":
                return out
            if kind != ",":
                raise LabelSelectorError(f"found '{literal}', expected: ',' or 'end of string'")
            kind, literal = self.peek()
            if kind not in ("id", "!"):
                raise LabelSelectorError(f"found '{literal}', expected: identifier after ','")

    def requirement(self) -> Parsed:
        kind, key = self.take()
        negated = kind == "!"
        if negated:
            kind, key = self.take()
        if kind != "id":
            raise LabelSelectorError(f"found '{key}', expected: identifier")
        if errors := is_qualified_name(key):
            raise LabelSelectorError(_invalid("<nil>", key, errors))
        if self.peek()[0] in ("end", ","):
            return _checked(Parsed(key, "!" if negated else "exists"))
        if negated:
            # `!key` followed by more: the requirement is over, the caller reports the rest.
            return _checked(Parsed(key, "!"))
        kind, literal = self.take(values=False)
        if kind not in ("in", "notin", "=", "==", "!=", ">", "<"):
            raise LabelSelectorError(f"found '{literal}', expected: {_BINARY}")
        if kind in ("in", "notin"):
            return _checked(Parsed(key, kind, self.value_set()))
        return _checked(Parsed(key, kind, (self.exact_value(),)))

    def value_set(self) -> tuple[str, ...]:
        kind, literal = self.take()
        if kind != "(":
            raise LabelSelectorError(f"found '{literal}' expected: '('")
        kind, literal = self.peek()
        if kind == ")":
            self.take()
            return ("",)
        if kind not in ("id", ","):
            raise LabelSelectorError(f"found '{literal}', expected: ',', ')' or identifier")
        values = self.identifiers()
        if self.take()[0] != ")":
            raise LabelSelectorError(f"found '{literal}', expected: ')'")
        return tuple(sorted(values))

    def identifiers(self) -> set[str]:
        values: set[str] = set()
        while True:
            kind, literal = self.take()
            if kind == "id":
                values.add(literal)
                following, shown = self.peek()
                if following == ")":
                    return values
                if following != ",":
                    raise LabelSelectorError(f"found '{shown}', expected: ',' or ')'")
            elif kind == ",":
                if not values:
                    values.add("")  # a list that starts with ","
                following = self.peek()[0]
                if following == ")":
                    values.add("")
                    return values
                if following == ",":
                    self.take()
                    values.add("")
            else:
                raise LabelSelectorError(f"found '{literal}', expected: ',', or identifier")

    def exact_value(self) -> str:
        if self.peek()[0] in ("end", ","):
            return ""
        kind, literal = self.take()
        if kind != "id":
            raise LabelSelectorError(f"found '{literal}', expected: identifier")
        return literal


def _checked(req: Parsed) -> Parsed:
    """The requirement's own validation (NewRequirement), errors aggregated as Go does."""
    errors: list[str] = []
    if req.op in (">", "<"):
        for i, value in enumerate(req.values):
            if not re.fullmatch(r"[+-]?[0-9]+", value) or not -(2**63) <= int(value) < 2**63:
                errors.append(
                    _invalid(
                        f"values[{i}]",
                        value,
                        ["for 'Gt', 'Lt' operators, the value must be an integer"],
                    )
                )
    for i, value in enumerate(req.values):
        if problems := is_valid_label_value(value):
            errors.append(_invalid(f"values[{i}][{req.key}]", value, problems))
    if errors:
        unique = list(dict.fromkeys(errors))
        raise LabelSelectorError(unique[0] if len(unique) == 1 else f"[{', '.join(unique)}]")
    return req


def parse(text: str) -> list[Parsed]:
    """The requirements of a label selector string; LabelSelectorError when it does not parse."""
    return _Parser(text).parse()
