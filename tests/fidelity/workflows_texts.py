"""Workflows about how requests are read and refused: JSON patches (kube-apiserver applies them
with evanphx/json-patch v4's lenient rules and tells only that one failed) and label selector
strings (apimachinery's grammar and its error texts)."""

from __future__ import annotations

from tests.fidelity.model import Step, Workflow, kc, patch

__all__ = ["WORKFLOWS"]

CM = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels: {app: web}
  finalizers: [example.com/a, example.com/b]
data: {color: blue, num: "1"}
"""


def _json(ops: str) -> Step:
    return patch("configmap settings --type=json", ops)


def _selector(text: str) -> Step:
    return kc(f"get configmaps -o name -l {text!r}")


WORKFLOWS: tuple[Workflow, ...] = (
    Workflow(
        "json-patch",
        "JSON patch operations as kube-apiserver applies them, its errors and warnings",
        (
            kc("create -f -", CM),
            _json('[{"op":"test","path":"/data/color","value":"red"}]'),
            _json('[{"op":"test","path":"/data/num","value":1}]'),
            _json('[{"op":"test","path":"/data/nosuch","value":null}]'),
            _json('[{"op":"remove","path":"/data/nosuch"}]'),
            _json('[{"op":"replace","path":"/data/added","value":"x"}]'),
            _json('[{"op":"move","from":"/data/added","path":"/data/moved"}]'),
            _json('[{"op":"copy","from":"/data/nosuch","path":"/data/copied"}]'),
            _json('[{"op":"add","path":"/nosuch/deeper","value":"x"}]'),
            _json('[{"op":"remove","path":"/data/color/0"}]'),
            _json('[{"op":"frobnicate","path":"/data/color"}]'),
            _json('[{"op":"add","value":"x"}]'),
            _json('[{"op":"add","path":"/metadata/finalizers/-1","value":"example.com/c"}]'),
            _json('[{"op":"remove","path":"/metadata/finalizers/0"}]'),
            _json('[{"op":"replace","path":"/metadata/finalizers/5","value":"example.com/x"}]'),
            _json('[{"op":"add","path":"/metadata/finalizers/x","value":"example.com/x"}]'),
            _json('[{"op":"add","path":"/metadata/labels/a~1b","value":"slash"}]'),
            _json('[{"op":"replace","path":"data/color","value":"x"}]'),
            _json('[{"op":"add","path":"/data/w","value":"x","extra":1,"op":"add"}]'),
            _json('{"op":"add","path":"/data/x","value":"x"}'),
            _json("[5]"),
            _json('[{"op":1,"path":"/data/x"}]'),
            _json("[]"),
            _json('[{"op":"remove","path":"/metadata/finalizers"}]'),
            kc("get configmap settings -o yaml --show-managed-fields"),
        ),
    ),
    Workflow(
        "label-selectors",
        "label selector strings: what parses, and the parser's errors",
        (
            kc("create configmap a --from-literal=k=v"),
            kc("label configmap a app=x tier=in"),
            _selector("tier in (in,notin)"),
            _selector("app in (,x)"),
            _selector("app,!nosuch,tier notin ()"),
            _selector("app>1"),
            _selector("Bad Key"),
            _selector("app=a b"),
            _selector("app in a"),
            _selector("app notin (a b)"),
            _selector("=x"),
            _selector("a,,b"),
            _selector("app,"),
            _selector("!app=x"),
            _selector("!"),
            _selector("app=(x)"),
            _selector("app>x"),
            _selector("app>-x"),
            _selector("app=-bad"),
            _selector("-app=x"),
            _selector("x/y/z=1"),
            _selector("/b=1"),
            _selector("Ex.com/b=1"),
            _selector("a" * 64),
        ),
    ),
)
