"""Server-side printers of the stored-only kinds `deploy/` uses: RBAC bindings,
PodDisruptionBudgets and NetworkPolicies (Roles and ClusterRoles print NAME / CREATED AT like
any other kind).

Columns and cells as kube-apiserver prints them: a binding's ROLE as `Role/name`, its subjects
split into USERS, GROUPS and SERVICEACCOUNTS (`namespace/name`) under `-o wide`; a budget's
MIN AVAILABLE / MAX UNAVAILABLE (`N/A` when unset) and ALLOWED DISRUPTIONS from its status; a
network policy's POD-SELECTOR (`<none>` for every pod).
Pure: `now` is a parameter.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from localcluster.http.cells import human_duration, label_selector, parse_time
from localcluster.http.printers import Column, RowFn

__all__ = ["POLICY_PRINTERS"]

Obj = dict[str, Any]
_S = "string"
_NAME: Column = ("Name", _S, 0, "name")
_AGE: Column = ("Age", _S, 0, "")


def _age(obj: Obj, now: datetime) -> str:
    when = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
    return "<unknown>" if when is None else human_duration((now - when).total_seconds())


def _binding_row(obj: Obj, now: datetime) -> list[Any]:
    ref = obj.get("roleRef") or {}
    users: list[str] = []
    groups: list[str] = []
    accounts: list[str] = []
    for subject in obj.get("subjects") or ():
        kind, name = subject.get("kind"), str(subject.get("name", ""))
        if kind == "User":
            users.append(name)
        elif kind == "Group":
            groups.append(name)
        elif kind == "ServiceAccount":
            accounts.append(f"{subject.get('namespace', '')}/{name}")
    return [
        (obj.get("metadata") or {}).get("name", ""),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        _age(obj, now),
        ", ".join(users),
        ", ".join(groups),
        ", ".join(accounts),
    ]


def _budget_row(obj: Obj, now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}

    def shown(value: Any) -> str:
        return "N/A" if value is None else str(value)

    return [
        (obj.get("metadata") or {}).get("name", ""),
        shown(spec.get("minAvailable")),
        shown(spec.get("maxUnavailable")),
        int(status.get("disruptionsAllowed") or 0),
        _age(obj, now),
    ]


def _network_policy_row(obj: Obj, now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    return [
        (obj.get("metadata") or {}).get("name", ""),
        label_selector(spec.get("podSelector")),
        _age(obj, now),
    ]


_BINDING: tuple[list[Column], RowFn] = (
    [
        _NAME,
        ("Role", _S, 0, ""),
        _AGE,
        ("Users", _S, 1, ""),
        ("Groups", _S, 1, ""),
        ("ServiceAccounts", _S, 1, ""),
    ],
    _binding_row,
)

POLICY_PRINTERS: dict[tuple[str, str], tuple[list[Column], RowFn]] = {
    ("rbac.authorization.k8s.io", "RoleBinding"): _BINDING,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): _BINDING,
    ("policy", "PodDisruptionBudget"): (
        [
            _NAME,
            ("Min Available", _S, 0, ""),
            ("Max Unavailable", _S, 0, ""),
            ("Allowed Disruptions", "integer", 0, ""),
            _AGE,
        ],
        _budget_row,
    ),
    ("networking.k8s.io", "NetworkPolicy"): (
        [_NAME, ("Pod-Selector", _S, 0, ""), _AGE],
        _network_policy_row,
    ),
}
