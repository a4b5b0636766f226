"""Which webhooks a request goes to: the API server's matching rules, as pure functions.

A webhook is called when (in this order, as the API server checks them) one of its `rules`
matches the request (operation, API group, version, resource incl. subresource wildcards,
scope), its `namespaceSelector` matches the namespace's labels, its `objectSelector` matches the
labels of the new or the old object, and every `matchConditions` CEL expression is true.

* Resources: `pods` matches the resource only, `pods/status` that subresource, `pods/*` the
  resource and all its subresources (the empty subresource included), `*` every resource but no subresource, `*/*` everything,
  `*/status` the status subresource of every resource.
* `scope`: `Cluster` / `Namespaced` / `*` (default). A Namespace object is cluster-scoped.
* `namespaceSelector`: namespaced requests use their namespace's labels; a request for a
  Namespace uses the namespace object's own labels; other cluster-scoped requests always match.
* `matchPolicy`: `Equivalent` (default) also matches a request for the same resource through
  another group/version. This server serves one version per resource, so Equivalent and Exact
  select the same requests.
* Requests for MutatingWebhookConfiguration and ValidatingWebhookConfiguration objects never go
  to webhooks (so a broken webhook can always be removed).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from localcluster.api.types import AdmissionAttributes

__all__ = [
    "Webhook",
    "exempt",
    "label_selector_matches",
    "matches_namespace",
    "matches_object",
    "matches_rules",
    "ordered_webhooks",
]

_EXEMPT = frozenset(
    {
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
        ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"),
    }
)


@dataclass(frozen=True)
class Webhook:
    """One webhook entry with the name of the configuration holding it."""

    configuration: str
    spec: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.spec.get("name", ""))

    @property
    def failure_policy(self) -> str:
        return str(self.spec.get("failurePolicy") or "Fail")

    @property
    def timeout_seconds(self) -> int:
        value = self.spec.get("timeoutSeconds")
        return int(value) if isinstance(value, int) and 1 <= value <= 30 else 10

    @property
    def reinvoke_if_needed(self) -> bool:
        return self.spec.get("reinvocationPolicy") == "IfNeeded"

    @property
    def side_effects_safe_for_dry_run(self) -> bool:
        return self.spec.get("sideEffects") in ("None", "NoneOnDryRun")


def ordered_webhooks(configurations: list[dict[str, Any]]) -> list[Webhook]:
    """Webhooks in the API server's order: configurations by name, then declaration order."""
    out: list[Webhook] = []
    for config in sorted(configurations, key=lambda c: str((c.get("metadata") or {}).get("name"))):
        name = str((config.get("metadata") or {}).get("name", ""))
        out.extend(
            Webhook(name, hook) for hook in config.get("webhooks") or [] if isinstance(hook, dict)
        )
    return out


def exempt(attrs: AdmissionAttributes) -> bool:
    return (attrs.info.group, attrs.info.plural) in _EXEMPT


def _listed(values: Any, value: str) -> bool:
    return isinstance(values, list) and ("*" in values or value in values)


def _resource_matches(patterns: list[str], resource: str, subresource: str) -> bool:
    for pattern in patterns:
        res, _, sub = pattern.partition("/")
        if res in ("*", resource) and sub in ("*", subresource):
            return True
    return False


def matches_rules(hook: dict[str, Any], attrs: AdmissionAttributes) -> bool:
    """Whether one of the webhook's rules covers the request."""
    info = attrs.info
    for rule in hook.get("rules") or []:
        if not _listed(rule.get("operations"), attrs.operation):
            continue
        if not _listed(rule.get("apiGroups"), info.group):
            continue
        if not _listed(rule.get("apiVersions"), info.version):
            continue
        if not _resource_matches(list(rule.get("resources") or []), info.plural, attrs.subresource):
            continue
        scope = rule.get("scope") or "*"
        if scope == "Cluster" and info.namespaced:
            continue
        if scope == "Namespaced" and not info.namespaced:
            continue
        return True
    return False


def label_selector_matches(selector: dict[str, Any] | None, labels: dict[str, Any] | None) -> bool:
    """A `metav1.LabelSelector` against labels (an empty or missing selector matches all)."""
    if not selector:
        return True
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key = expr.get("key", "")
        op = expr.get("operator", "")
        values = expr.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


def _labels(obj: dict[str, Any] | None) -> dict[str, Any]:
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})


def matches_namespace(
    hook: dict[str, Any], attrs: AdmissionAttributes, namespace: dict[str, Any] | None
) -> bool:
    selector = hook.get("namespaceSelector")
    if not selector:
        return True
    info = attrs.info
    if info.group == "" and info.plural == "namespaces":
        return label_selector_matches(selector, _labels(attrs.obj or attrs.old_obj))
    if not info.namespaced:
        return True
    return label_selector_matches(selector, _labels(namespace))


def matches_object(hook: dict[str, Any], attrs: AdmissionAttributes) -> bool:
    selector = hook.get("objectSelector")
    if not selector:
        return True
    return any(
        label_selector_matches(selector, _labels(o)) for o in _present(attrs.obj, attrs.old_obj)
    )


def _present(*objs: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
    yield from (o for o in objs if o is not None)
