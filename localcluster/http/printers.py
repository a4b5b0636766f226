"""Server-side printers of the built-in kinds: the columns and cells of `kubectl get`.

One row function per kind, mirroring the real API server's printers (kubernetes
`pkg/printers/internalversion`): the pod STATUS reason logic (init containers, waiting and
terminated reasons, Terminating), RESTARTS with the time of the last restart, service ports as
`80:30080/TCP`, node roles from `node-role.kubernetes.io/*` labels, events of both event APIs.
Cells are rendered here (AGE as `5m2s`), so kubectl prints them as they are. Columns with
priority 1 are the `-o wide` ones. Pure: `now` is a parameter.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "BUILTIN_PRINTERS",
    "CREATED_AT_PRINTER",
    "NAME_COLUMN",
    "Column",
    "RowFn",
    "human_duration",
    "label_selector",
    "parse_time",
]

Obj = dict[str, Any]
Column = tuple[str, str, int, str]  # name, type, priority, format
RowFn = Callable[[Obj, datetime], list[Any]]


def human_duration(seconds: float) -> str:
    """kubectl's age rendering (`5s`, `3m2s`, `5h`, `2d3h`, `1y20d`)."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rem = s % 60
        return f"{minutes}m{rem}s" if rem else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rem = minutes % 60
        return f"{hours}h{rem}m" if rem else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rem = hours % 24
        return f"{hours // 24}d{rem}h" if rem else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


# --------------------------------------------------------------------------- helpers


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp (None when absent or malformed)."""
    if not isinstance(value, str) or not value:
        return None
    return _parse_time(value)


@functools.lru_cache(maxsize=4096)
def _parse_time(value: str) -> datetime | None:
    # Objects created together share timestamps: a cache makes 10k-row tables cheap.
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _since(value: Any, now: datetime) -> str:
    when = parse_time(value)
    if when is None:
        return "<unknown>"
    return human_duration((now - when).total_seconds())


def _age(obj: Obj, now: datetime) -> str:
    return _since(obj.get("metadata", {}).get("creationTimestamp"), now)


def _name(obj: Obj) -> str:
    return str(obj.get("metadata", {}).get("name", ""))


def _get(obj: Any, *path: str | int) -> Any:
    cur = obj
    for p in path:
        if isinstance(p, int):
            if not isinstance(cur, list) or p >= len(cur):
                return None
            cur = cur[p]
        else:
            if not isinstance(cur, dict):
                return None
            cur = cur.get(p)
    return cur


def _or_none(value: Any) -> str:
    return str(value) if value not in (None, "", []) else "<none>"


def _selector(sel: dict[str, Any] | None) -> str:
    if not sel:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(sel.items()))


def label_selector(sel: dict[str, Any] | None) -> str:
    """A LabelSelector as kubectl prints it (`app=web,tier in (a,b)`), `<none>` when empty."""
    if not sel:
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for expr in sel.get("matchExpressions") or []:
        op = expr.get("operator", "")
        key = expr.get("key", "")
        values = ",".join(expr.get("values") or [])
        if op == "In":
            parts.append(f"{key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or "<none>"


# --------------------------------------------------------------------------- built-in printers


def _pod_status(pod: Obj) -> str:
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase") or ""
    init_statuses = status.get("initContainerStatuses") or []
    init_count = len((pod.get("spec") or {}).get("initContainers") or ())
    initializing = False
    for i, cs in enumerate(init_statuses):
        state = cs.get("state") or {}
        term = state.get("terminated")
        waiting = state.get("waiting")
        if term and term.get("exitCode") == 0:
            continue
        if term:
            if term.get("reason"):
                reason = f"Init:{term['reason']}"
            elif term.get("signal"):
                reason = f"Init:Signal:{term['signal']}"
            else:
                reason = f"Init:ExitCode:{term.get('exitCode', 0)}"
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{i}/{init_count}"
        initializing = True
        break
    if not initializing:
        has_running = False
        for cs in reversed(status.get("containerStatuses") or []):
            state = cs.get("state") or {}
            waiting, term = state.get("waiting"), state.get("terminated")
            if waiting and waiting.get("reason"):
                reason = waiting["reason"]
            elif term and term.get("reason"):
                reason = term["reason"]
            elif term:
                reason = (
                    f"Signal:{term['signal']}"
                    if term.get("signal")
                    else f"ExitCode:{term.get('exitCode', 0)}"
                )
            elif state.get("running") and cs.get("ready"):
                has_running = True
        if reason == "Completed" and has_running:
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or []
            )
            reason = "Running" if ready else "NotReady"
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    return str(reason)


def _pod_row(pod: Obj, now: datetime) -> list[Any]:
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    spec = pod.get("spec") or {}
    total = len(spec.get("containers") or ())
    ready = sum(1 for cs in statuses if cs.get("ready"))
    restarts = 0
    last_restart: datetime | None = None
    for cs in [*(status.get("initContainerStatuses") or []), *statuses]:
        restarts += int(cs.get("restartCount") or 0)
        terminated = (cs.get("lastState") or {}).get("terminated")
        finished = parse_time(terminated.get("finishedAt")) if terminated else None
        if finished and (last_restart is None or finished > last_restart):
            last_restart = finished
    restarts_cell = str(restarts)
    if restarts and last_restart is not None:
        ago = human_duration((now - last_restart).total_seconds())
        restarts_cell = f"{restarts} ({ago} ago)"
    gates = spec.get("readinessGates") or []
    if gates:
        conds = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        true = sum(1 for g in gates if conds.get(g.get("conditionType")) == "True")
        gates_cell = f"{true}/{len(gates)}"
    else:
        gates_cell = "<none>"
    return [
        _name(pod),
        f"{ready}/{total}",
        _pod_status(pod),
        restarts_cell,
        _age(pod, now),
        _or_none(status.get("podIP")),
        _or_none(spec.get("nodeName")),
        _or_none(status.get("nominatedNodeName")),
        gates_cell,
    ]


def _service_row(svc: Obj, now: datetime) -> list[Any]:
    spec = svc.get("spec") or {}
    typ = spec.get("type") or "ClusterIP"
    external: str
    if typ == "LoadBalancer":
        ingress = _get(svc, "status", "loadBalancer", "ingress") or []
        ips = [i.get("ip") or i.get("hostname") for i in ingress] + list(
            spec.get("externalIPs") or []
        )
        external = ",".join(str(i) for i in ips if i) or "<pending>"
    elif typ == "ExternalName":
        external = str(spec.get("externalName") or "<none>")
    else:
        external = ",".join(spec.get("externalIPs") or []) or "<none>"
    ports = []
    for p in spec.get("ports") or []:
        proto = p.get("protocol") or "TCP"
        if p.get("nodePort"):
            ports.append(f"{p.get('port')}:{p['nodePort']}/{proto}")
        else:
            ports.append(f"{p.get('port')}/{proto}")
    return [
        _name(svc),
        typ,
        _or_none(spec.get("clusterIP")),
        external,
        ",".join(ports) or "<none>",
        _age(svc, now),
        _selector(spec.get("selector")),
    ]


def _deployment_row(dep: Obj, now: datetime) -> list[Any]:
    spec = dep.get("spec") or {}
    status = dep.get("status") or {}
    desired = spec.get("replicas", 1)
    containers = _get(spec, "template", "spec", "containers") or []
    return [
        _name(dep),
        f"{status.get('readyReplicas', 0)}/{desired}",
        int(status.get("updatedReplicas", 0)),
        int(status.get("availableReplicas", 0)),
        _age(dep, now),
        ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
        label_selector(spec.get("selector")),
    ]


def _replica_set_row(rs: Obj, now: datetime) -> list[Any]:
    spec = rs.get("spec") or {}
    status = rs.get("status") or {}
    containers = _get(spec, "template", "spec", "containers") or []
    return [
        _name(rs),
        int(spec.get("replicas", 1)),
        int(status.get("replicas", 0)),
        int(status.get("readyReplicas", 0)),
        _age(rs, now),
        ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
        label_selector(spec.get("selector")),
    ]


def _node_row(node: Obj, now: datetime) -> list[Any]:
    status = node.get("status") or {}
    ready = "Unknown"
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready":
            ready = "Ready" if cond.get("status") == "True" else "NotReady"
    if _get(node, "spec", "unschedulable"):
        ready += ",SchedulingDisabled"
    prefix = "node-role.kubernetes.io/"
    labels = _get(node, "metadata", "labels") or {}
    roles = sorted(k[len(prefix) :] for k in labels if k.startswith(prefix) and k != prefix)
    info = status.get("nodeInfo") or {}
    addresses = status.get("addresses") or []

    def addr(kind: str) -> str:
        return next((a["address"] for a in addresses if a.get("type") == kind), "<none>")

    return [
        _name(node),
        ready,
        ",".join(roles) or "<none>",
        _age(node, now),
        str(info.get("kubeletVersion", "")),
        addr("InternalIP"),
        addr("ExternalIP"),
        _or_none(info.get("osImage")),
        _or_none(info.get("kernelVersion")),
        _or_none(info.get("containerRuntimeVersion")),
    ]


def _event_row(ev: Obj, now: datetime) -> list[Any]:
    # core/v1 Event and events.k8s.io/v1 Event name the same facts differently.
    obj = ev.get("involvedObject") or ev.get("regarding") or {}
    last = (
        ev.get("lastTimestamp")
        or ev.get("deprecatedLastTimestamp")
        or _get(ev, "series", "lastObservedTime")
        or ev.get("eventTime")
        or _get(ev, "metadata", "creationTimestamp")
    )
    first = ev.get("firstTimestamp") or ev.get("deprecatedFirstTimestamp") or ev.get("eventTime")
    source = ev.get("source") or ev.get("deprecatedSource") or {}
    src = source.get("component") or ev.get("reportingController") or ""
    if source.get("host"):
        src = f"{src}, {source['host']}"
    count = ev.get("count") or ev.get("deprecatedCount") or _get(ev, "series", "count") or 1
    return [
        _since(last, now),
        str(ev.get("type", "")),
        str(ev.get("reason", "")),
        f"{str(obj.get('kind', '')).lower()}/{obj.get('name', '')}",
        str(obj.get("fieldPath", "")),
        src,
        str(ev.get("message") or ev.get("note") or "").strip(),
        _since(first, now) if first else "<unknown>",
        int(count),
        _name(ev),
    ]


def _endpoints_row(ep: Obj, now: datetime) -> list[Any]:
    items: list[str] = []
    for subset in ep.get("subsets") or []:
        ports = subset.get("ports") or []
        for address in subset.get("addresses") or []:
            ip = address.get("ip", "")
            if ports:
                items.extend(f"{ip}:{p.get('port')}" for p in ports)
            else:
                items.append(ip)
    text = ",".join(items[:3]) if items else "<none>"
    if len(items) > 3:
        text += f" + {len(items) - 3} more..."
    return [_name(ep), text, _age(ep, now)]


def _simple(*cells: Callable[[Obj], Any]) -> RowFn:
    def row(obj: Obj, now: datetime) -> list[Any]:
        return [_name(obj), *(fn(obj) for fn in cells), _age(obj, now)]

    return row


def _created_at(obj: Obj, now: datetime) -> list[Any]:
    return [_name(obj), _get(obj, "metadata", "creationTimestamp")]


_S = "string"
_NAME: Column = ("Name", _S, 0, "name")
_AGE: Column = ("Age", _S, 0, "")
_CREATED_AT: list[Column] = [_NAME, ("Created At", "date", 0, "")]

BUILTIN_PRINTERS: dict[tuple[str, str], tuple[list[Column], RowFn]] = {
    ("", "Pod"): (
        [
            _NAME,
            ("Ready", _S, 0, ""),
            ("Status", _S, 0, ""),
            ("Restarts", _S, 0, ""),
            _AGE,
            ("IP", _S, 1, ""),
            ("Node", _S, 1, ""),
            ("Nominated Node", _S, 1, ""),
            ("Readiness Gates", _S, 1, ""),
        ],
        _pod_row,
    ),
    ("", "Service"): (
        [
            _NAME,
            ("Type", _S, 0, ""),
            ("Cluster-IP", _S, 0, ""),
            ("External-IP", _S, 0, ""),
            ("Port(s)", _S, 0, ""),
            _AGE,
            ("Selector", _S, 1, ""),
        ],
        _service_row,
    ),
    ("apps", "Deployment"): (
        [
            _NAME,
            ("Ready", _S, 0, ""),
            ("Up-to-date", "integer", 0, ""),
            ("Available", "integer", 0, ""),
            _AGE,
            ("Containers", _S, 1, ""),
            ("Images", _S, 1, ""),
            ("Selector", _S, 1, ""),
        ],
        _deployment_row,
    ),
    ("apps", "ReplicaSet"): (
        [
            _NAME,
            ("Desired", "integer", 0, ""),
            ("Current", "integer", 0, ""),
            ("Ready", "integer", 0, ""),
            _AGE,
            ("Containers", _S, 1, ""),
            ("Images", _S, 1, ""),
            ("Selector", _S, 1, ""),
        ],
        _replica_set_row,
    ),
    ("", "Node"): (
        [
            _NAME,
            ("Status", _S, 0, ""),
            ("Roles", _S, 0, ""),
            _AGE,
            ("Version", _S, 0, ""),
            ("Internal-IP", _S, 1, ""),
            ("External-IP", _S, 1, ""),
            ("OS-Image", _S, 1, ""),
            ("Kernel-Version", _S, 1, ""),
            ("Container-Runtime", _S, 1, ""),
        ],
        _node_row,
    ),
    ("", "Namespace"): (
        [_NAME, ("Status", _S, 0, ""), _AGE],
        _simple(lambda o: _get(o, "status", "phase") or "Active"),
    ),
    ("", "ConfigMap"): (
        [_NAME, ("Data", "integer", 0, ""), _AGE],
        _simple(lambda o: len(o.get("data") or {}) + len(o.get("binaryData") or {})),
    ),
    ("", "Secret"): (
        [_NAME, ("Type", _S, 0, ""), ("Data", "integer", 0, ""), _AGE],
        _simple(
            lambda o: o.get("type") or "Opaque",
            lambda o: len(o.get("data") or {}) + len(o.get("stringData") or {}),
        ),
    ),
    ("", "ServiceAccount"): (
        [_NAME, ("Secrets", "integer", 0, ""), _AGE],
        _simple(lambda o: len(o.get("secrets") or [])),
    ),
    ("", "Endpoints"): ([_NAME, ("Endpoints", _S, 0, ""), _AGE], _endpoints_row),
    ("coordination.k8s.io", "Lease"): (
        [_NAME, ("Holder", _S, 0, ""), _AGE],
        _simple(lambda o: _get(o, "spec", "holderIdentity") or ""),
    ),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): (
        [_NAME, ("Webhooks", "integer", 0, ""), _AGE],
        _simple(lambda o: len(o.get("webhooks") or [])),
    ),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): (
        [_NAME, ("Webhooks", "integer", 0, ""), _AGE],
        _simple(lambda o: len(o.get("webhooks") or [])),
    ),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): (_CREATED_AT, _created_at),
}
_EVENT_COLUMNS: list[Column] = [
    ("Last Seen", _S, 0, ""),
    ("Type", _S, 0, ""),
    ("Reason", _S, 0, ""),
    ("Object", _S, 0, ""),
    ("Subobject", _S, 1, ""),
    ("Source", _S, 1, ""),
    ("Message", _S, 0, ""),
    ("First Seen", _S, 1, ""),
    ("Count", "integer", 1, ""),
    ("Name", _S, 1, "name"),
]
BUILTIN_PRINTERS[("", "Event")] = (_EVENT_COLUMNS, _event_row)
BUILTIN_PRINTERS[("events.k8s.io", "Event")] = (_EVENT_COLUMNS, _event_row)
NAME_COLUMN = _NAME
CREATED_AT_PRINTER: tuple[list[Column], RowFn] = (_CREATED_AT, _created_at)
