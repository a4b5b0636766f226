"""Server-side printers of the built-in kinds: the columns and cells of `kubectl get`.

One row function per kind, mirroring the real API server's printers (kubernetes
`pkg/printers/internalversion`): the pod STATUS reason logic (init containers, waiting and
terminated reasons, Terminating), RESTARTS with the time of the last restart, service ports as
`80:30080/TCP`, node roles from `node-role.kubernetes.io/*` labels, events of both event APIs.
Cells are rendered here (AGE as `5m2s`, by `cells.py`), so kubectl prints them as they are.
Columns with priority 1 are the `-o wide` ones. Pure: `now` is a parameter.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from localcluster.http import cells

__all__ = [
    "BUILTIN_PRINTERS",
    "CREATED_AT_PRINTER",
    "NAME_COLUMN",
    "Column",
    "RowFn",
]

Obj = dict[str, Any]
Column = tuple[str, str, int, str]  # name, type, priority, format
RowFn = Callable[[Obj, datetime], list[Any]]


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
        finished = cells.parse_time(terminated.get("finishedAt")) if terminated else None
        if finished and (last_restart is None or finished > last_restart):
            last_restart = finished
    restarts_cell = str(restarts)
    if restarts and last_restart is not None:
        ago = cells.human_duration((now - last_restart).total_seconds())
        restarts_cell = f"{restarts} ({ago} ago)"
    gates = spec.get("readinessGates") or []
    if gates:
        conds = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        true = sum(1 for g in gates if conds.get(g.get("conditionType")) == "True")
        gates_cell = f"{true}/{len(gates)}"
    else:
        gates_cell = "<none>"
    return [
        cells.name(pod),
        f"{ready}/{total}",
        _pod_status(pod),
        restarts_cell,
        cells.age(pod, now),
        cells.or_none(status.get("podIP")),
        cells.or_none(spec.get("nodeName")),
        cells.or_none(status.get("nominatedNodeName")),
        gates_cell,
    ]


def _service_row(svc: Obj, now: datetime) -> list[Any]:
    spec = svc.get("spec") or {}
    typ = spec.get("type") or "ClusterIP"
    external: str
    if typ == "LoadBalancer":
        ingress = cells.get(svc, "status", "loadBalancer", "ingress") or []
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
        cells.name(svc),
        typ,
        cells.or_none(spec.get("clusterIP")),
        external,
        ",".join(ports) or "<none>",
        cells.age(svc, now),
        cells.map_selector(spec.get("selector")),
    ]


def _deployment_row(dep: Obj, now: datetime) -> list[Any]:
    spec = dep.get("spec") or {}
    status = dep.get("status") or {}
    desired = spec.get("replicas", 1)
    containers = cells.get(spec, "template", "spec", "containers") or []
    return [
        cells.name(dep),
        f"{status.get('readyReplicas', 0)}/{desired}",
        int(status.get("updatedReplicas", 0)),
        int(status.get("availableReplicas", 0)),
        cells.age(dep, now),
        ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
        cells.label_selector(spec.get("selector")),
    ]


def _replica_set_row(rs: Obj, now: datetime) -> list[Any]:
    spec = rs.get("spec") or {}
    status = rs.get("status") or {}
    containers = cells.get(spec, "template", "spec", "containers") or []
    return [
        cells.name(rs),
        int(spec.get("replicas", 1)),
        int(status.get("replicas", 0)),
        int(status.get("readyReplicas", 0)),
        cells.age(rs, now),
        ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
        cells.label_selector(spec.get("selector")),
    ]


def _node_row(node: Obj, now: datetime) -> list[Any]:
    status = node.get("status") or {}
    ready = "Unknown"
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready":
            ready = "Ready" if cond.get("status") == "True" else "NotReady"
    if cells.get(node, "spec", "unschedulable"):
        ready += ",SchedulingDisabled"
    prefix = "node-role.kubernetes.io/"
    labels = cells.get(node, "metadata", "labels") or {}
    roles = sorted(k[len(prefix) :] for k in labels if k.startswith(prefix) and k != prefix)
    info = status.get("nodeInfo") or {}
    addresses = status.get("addresses") or []

    def addr(kind: str) -> str:
        return next((a["address"] for a in addresses if a.get("type") == kind), "<none>")

    return [
        cells.name(node),
        ready,
        ",".join(roles) or "<none>",
        cells.age(node, now),
        str(info.get("kubeletVersion", "")),
        addr("InternalIP"),
        addr("ExternalIP"),
        cells.or_none(info.get("osImage")),
        cells.or_none(info.get("kernelVersion")),
        cells.or_none(info.get("containerRuntimeVersion")),
    ]


def _event_row(ev: Obj, now: datetime) -> list[Any]:
    # core/v1 Event and events.k8s.io/v1 Event name the same facts differently.
    obj = ev.get("involvedObject") or ev.get("regarding") or {}
    last = (
        ev.get("lastTimestamp")
        or ev.get("deprecatedLastTimestamp")
        or cells.get(ev, "series", "lastObservedTime")
        or ev.get("eventTime")
        or cells.get(ev, "metadata", "creationTimestamp")
    )
    first = ev.get("firstTimestamp") or ev.get("deprecatedFirstTimestamp") or ev.get("eventTime")
    source = ev.get("source") or ev.get("deprecatedSource") or {}
    src = source.get("component") or ev.get("reportingController") or ""
    if source.get("host"):
        src = f"{src}, {source['host']}"
    count = ev.get("count") or ev.get("deprecatedCount") or cells.get(ev, "series", "count") or 1
    return [
        cells.since(last, now),
        str(ev.get("type", "")),
        str(ev.get("reason", "")),
        f"{str(obj.get('kind', '')).lower()}/{obj.get('name', '')}",
        str(obj.get("fieldPath", "")),
        src,
        str(ev.get("message") or ev.get("note") or "").strip(),
        cells.since(first, now) if first else "<unknown>",
        int(count),
        cells.name(ev),
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
    return [cells.name(ep), text, cells.age(ep, now)]


def _simple(*cell_fns: Callable[[Obj], Any]) -> RowFn:
    def row(obj: Obj, now: datetime) -> list[Any]:
        return [cells.name(obj), *(fn(obj) for fn in cell_fns), cells.age(obj, now)]

    return row


def _created_at(obj: Obj, now: datetime) -> list[Any]:
    return [cells.name(obj), cells.get(obj, "metadata", "creationTimestamp")]


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
        _simple(lambda o: cells.get(o, "status", "phase") or "Active"),
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
        _simple(lambda o: cells.get(o, "spec", "holderIdentity") or ""),
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
