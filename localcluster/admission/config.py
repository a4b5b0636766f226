"""Validation of Mutating/ValidatingWebhookConfiguration objects (admissionregistration/v1).

A real API server refuses a webhook configuration it could not call correctly — a name that is
not a qualified domain, a missing `sideEffects` or `admissionReviewVersions`, a plain-http
`url`, both or neither of `url` and `service`, a timeout outside 1–30 s, an unknown operation,
a `matchConditions` expression that does not compile — so the mistake surfaces at `kubectl
apply` time rather than as failed calls later. These are those rules, with the apimachinery
texts; the result is a list of Status causes for a 422 Invalid.
"""

from __future__ import annotations

from typing import Any

from localcluster.api.fielderrors import FieldError
from localcluster.schema import celrules

__all__ = ["validate_webhook_configuration"]

_OPERATIONS = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"]
_SIDE_EFFECTS = ["None", "NoneOnDryRun"]
_REVIEW_VERSIONS = ("v1", "v1beta1")
_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def validate_webhook_configuration(obj: dict[str, Any], *, mutating: bool) -> list[dict[str, str]]:
    """Status causes for everything the API server would refuse in the configuration."""
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, hook in enumerate(obj.get("webhooks") or []):
        path = f"webhooks[{i}]"
        if not isinstance(hook, dict):
            errors.append(FieldError.invalid(path, "", "must be an object"))
            continue
        name = str(hook.get("name") or "")
        if not name:
            errors.append(FieldError.required(f"{path}.name"))
        elif len([p for p in name.split(".") if p]) < 3:
            errors.append(
                FieldError.invalid(
                    f"{path}.name",
                    name,
                    "should be a domain with at least three segments separated by dots",
                )
            )
        elif name in seen:
            errors.append(FieldError.duplicate(f"{path}.name", name))
        seen.add(name)
        errors.extend(_webhook(hook, path, mutating=mutating))
    return [e.cause() for e in errors]


def _webhook(hook: dict[str, Any], path: str, *, mutating: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    versions = hook.get("admissionReviewVersions")
    if not versions:
        errors.append(
            FieldError.required(
                f"{path}.admissionReviewVersions", "must specify one of v1, v1beta1"
            )
        )
    elif not any(v in _REVIEW_VERSIONS for v in versions):
        errors.append(
            FieldError.invalid(
                f"{path}.admissionReviewVersions", versions,
                "must include at least one of v1, v1beta1",
            )
        )  # fmt: skip
    side_effects = hook.get("sideEffects")
    if side_effects is None:
        errors.append(
            FieldError.required(f"{path}.sideEffects", "must specify one of None, NoneOnDryRun")
        )
    elif side_effects not in _SIDE_EFFECTS:
        errors.append(FieldError.not_supported(f"{path}.sideEffects", side_effects, _SIDE_EFFECTS))
    for field, allowed in (
        ("failurePolicy", ["Fail", "Ignore"]),
        ("matchPolicy", ["Equivalent", "Exact"]),
    ):
        value = hook.get(field)
        if value is not None and value not in allowed:
            errors.append(FieldError.not_supported(f"{path}.{field}", value, allowed))
    reinvocation = hook.get("reinvocationPolicy")
    if reinvocation is not None:
        if not mutating:
            errors.append(
                FieldError.forbidden(
                    f"{path}.reinvocationPolicy", "only mutating webhooks may be reinvoked"
                )
            )
        elif reinvocation not in ("IfNeeded", "Never"):
            errors.append(
                FieldError.not_supported(
                    f"{path}.reinvocationPolicy", reinvocation, ["IfNeeded", "Never"]
                )
            )
    timeout = hook.get("timeoutSeconds")
    if timeout is not None and not (isinstance(timeout, int) and 1 <= timeout <= 30):
        errors.append(
            FieldError.invalid(
                f"{path}.timeoutSeconds", timeout,
                "the timeout value must be between 1 and 30 seconds",
            )
        )  # fmt: skip
    errors.extend(_client_config(hook.get("clientConfig"), f"{path}.clientConfig"))
    for j, rule in enumerate(hook.get("rules") or []):
        errors.extend(_rule(rule, f"{path}.rules[{j}]"))
    for field in ("namespaceSelector", "objectSelector"):
        errors.extend(_selector(hook.get(field), f"{path}.{field}"))
    errors.extend(_match_conditions(hook.get("matchConditions"), f"{path}.matchConditions"))
    return errors


def _client_config(config: Any, path: str) -> list[FieldError]:
    config = config if isinstance(config, dict) else {}
    url, service = config.get("url"), config.get("service")
    if bool(url) == bool(service):
        return [FieldError.required(path, "exactly one of url or service is required")]
    errors: list[FieldError] = []
    if url:
        text = str(url)
        if not text.startswith("https://"):
            errors.append(
                FieldError.invalid(f"{path}.url", text, "'https' is the only allowed URL scheme")
            )
        elif "#" in text:
            errors.append(FieldError.invalid(f"{path}.url", text, "fragments are not permitted"))
        elif "?" in text:
            errors.append(
                FieldError.invalid(f"{path}.url", text, "query parameters are not permitted")
            )
        elif "@" in text.split("/", 3)[2]:
            errors.append(
                FieldError.invalid(f"{path}.url", text, "user information is not permitted")
            )
        return errors
    svc = service if isinstance(service, dict) else {}
    for field in ("namespace", "name"):
        if not svc.get(field):
            errors.append(
                FieldError.required(f"{path}.service.{field}", "service " + field + " is required")
            )
    svc_path = svc.get("path")
    if svc_path is not None and not str(svc_path).startswith("/"):
        errors.append(FieldError.invalid(f"{path}.service.path", svc_path, "must start with a '/'"))
    port = svc.get("port")
    if port is not None and not (isinstance(port, int) and 1 <= port <= 65535):
        errors.append(
            FieldError.invalid(
                f"{path}.service.port",
                port,
                "port is not valid: must be between 1 and 65535, inclusive",
            )
        )
    return errors


def _rule(rule: Any, path: str) -> list[FieldError]:
    rule = rule if isinstance(rule, dict) else {}
    errors: list[FieldError] = []
    operations = rule.get("operations") or []
    if not operations:
        errors.append(FieldError.required(f"{path}.operations"))
    for k, op in enumerate(operations):
        if op not in _OPERATIONS:
            errors.append(FieldError.not_supported(f"{path}.operations[{k}]", op, _OPERATIONS))
    if "*" in operations and len(operations) > 1:
        errors.append(
            FieldError.invalid(
                f"{path}.operations",
                operations,
                "if '*' is present, must not specify other operations",
            )
        )
    for field in ("apiGroups", "apiVersions", "resources"):
        values = rule.get(field) or []
        if not values:
            errors.append(FieldError.required(f"{path}.{field}"))
        elif "*" in values and len(values) > 1:
            errors.append(
                FieldError.invalid(
                    f"{path}.{field}", values, f"if '*' is present, must not specify other {field}"
                )
            )
    scope = rule.get("scope")
    if scope is not None and scope not in ("*", "Cluster", "Namespaced"):
        errors.append(
            FieldError.not_supported(f"{path}.scope", scope, ["*", "Cluster", "Namespaced"])
        )
    return errors


def _selector(selector: Any, path: str) -> list[FieldError]:
    if not isinstance(selector, dict):
        return []
    errors: list[FieldError] = []
    for k, expr in enumerate(selector.get("matchExpressions") or []):
        expr = expr if isinstance(expr, dict) else {}
        op = expr.get("operator")
        where = f"{path}.matchExpressions[{k}]"
        if op not in _SELECTOR_OPERATORS:
            errors.append(
                FieldError.not_supported(f"{where}.operator", op, list(_SELECTOR_OPERATORS))
            )
        elif op in ("In", "NotIn") and not expr.get("values"):
            errors.append(
                FieldError.required(
                    f"{where}.values", "must be specified when `operator` is 'In' or 'NotIn'"
                )
            )
        elif op in ("Exists", "DoesNotExist") and expr.get("values"):
            errors.append(
                FieldError.forbidden(
                    f"{where}.values",
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
            )
    return errors


def _match_conditions(conditions: Any, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    names: set[str] = set()
    for k, condition in enumerate(conditions or []):
        condition = condition if isinstance(condition, dict) else {}
        name = str(condition.get("name") or "")
        expression = str(condition.get("expression") or "")
        if not name:
            errors.append(FieldError.required(f"{path}[{k}].name"))
        elif name in names:
            errors.append(FieldError.duplicate(f"{path}[{k}].name", name))
        names.add(name)
        if not expression:
            errors.append(FieldError.required(f"{path}[{k}].expression"))
            continue
        problem = celrules.compile_error(expression)
        if problem:
            errors.append(
                FieldError.invalid(
                    f"{path}[{k}].expression", expression, f"compilation failed: {problem}"
                )
            )
    if len(conditions or []) > 64:
        errors.append(FieldError.too_many(path, len(conditions), 64))
    return errors
