"""Label selector strings parsed as apimachinery's labels.Parse parses them, refused with its
words. Every error text here was printed by kube-apiserver v1.32.13 (hack/reference-cluster)
for `kubectl get configmaps -l SELECTOR`; the fidelity suite's `label-selectors` workflow keeps
comparing a selection of them with the reference."""

from __future__ import annotations

import pytest

from localcluster.store.labelselector import LabelSelectorError, Parsed, parse

_VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
_NAME_RULE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used "
    "for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_REQ = "unable to parse requirement: "
_INTEGER = "for 'Gt', 'Lt' operators, the value must be an integer"

PARSED = {
    "": [],
    "app": [Parsed("app", "exists")],
    "!app, b": [Parsed("app", "!"), Parsed("b", "exists")],
    "app==x,b!=": [Parsed("app", "==", ("x",)), Parsed("b", "!=", ("",))],
    "app in ()": [Parsed("app", "in", ("",))],
    "app in (b,,a)": [Parsed("app", "in", ("", "a", "b"))],
    "app notin (a,)": [Parsed("app", "notin", ("", "a"))],
    "in in (in)": [Parsed("in", "in", ("in",))],
    "x=1,y in (notin,in)": [Parsed("x", "=", ("1",)), Parsed("y", "in", ("in", "notin"))],
    "a>5,b<3": [Parsed("a", ">", ("5",)), Parsed("b", "<", ("3",))],
    "example.com/a.b-c_d=e.f-g_h": [Parsed("example.com/a.b-c_d", "=", ("e.f-g_h",))],
}


@pytest.mark.parametrize(("text", "expected"), PARSED.items(), ids=lambda v: repr(v))
def test_selectors_that_parse(text: str, expected: list[Parsed]) -> None:
    assert parse(text) == expected


REFUSED = {
    "Bad Key": _REQ + "found 'Key', expected: in, notin, =, ==, !=, gt, lt",
    "app gt 5": _REQ + "found 'gt', expected: in, notin, =, ==, !=, gt, lt",
    "app=a b": "found 'b', expected: ',' or 'end of string'",
    "!app=x": "found '=', expected: ',' or 'end of string'",
    "app in (a)(b)": "found '(', expected: ',' or 'end of string'",
    "app in a": _REQ + "found 'a' expected: '('",
    "app in (a,b": _REQ + "found '', expected: ',' or ')'",
    "app notin (a b)": _REQ + "found 'b', expected: ',' or ')'",
    "app in (a,": _REQ + "found '', expected: ',', or identifier",
    "=x": "found '=', expected: !, identifier, or 'end of string'",
    ",app": "found ',', expected: !, identifier, or 'end of string'",
    "a,,b": "found ',', expected: identifier after ','",
    "app,": "found '', expected: identifier after ','",
    "!": _REQ + "found '', expected: identifier",
    "app=(x)": _REQ + "found '(', expected: identifier",
    "app>x": _REQ + f'values[0]: Invalid value: "x": {_INTEGER}',
    "app=-bad": _REQ + f'values[0][app]: Invalid value: "-bad": {_VALUE_RULE}',
    "app>-x": _REQ
    + f'[values[0]: Invalid value: "-x": {_INTEGER}, '
    + f'values[0][app]: Invalid value: "-x": {_VALUE_RULE}]',
    "app=" + "v" * 64: _REQ
    + f'values[0][app]: Invalid value: "{"v" * 64}": must be no more than 63 characters',
    "-app=x": _REQ + f'<nil>: Invalid value: "-app": {_NAME_RULE}',
    "a" * 64: _REQ + f'<nil>: Invalid value: "{"a" * 64}": name part must be no more than 63 '
    "characters",
    "/b=1": _REQ + '<nil>: Invalid value: "/b": prefix part must be non-empty',
    "x/y/z=1": _REQ
    + '<nil>: Invalid value: "x/y/z": a qualified name must consist of alphanumeric characters, '
    "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  "
    "or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' "
    "(e.g. 'example.com/MyName')",
}


@pytest.mark.parametrize(("text", "message"), REFUSED.items(), ids=lambda v: repr(v)[:40])
def test_selectors_refused_with_kube_apiservers_words(text: str, message: str) -> None:
    with pytest.raises(LabelSelectorError) as caught:
        parse(text)
    assert str(caught.value) == message
