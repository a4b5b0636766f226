"""Warnings: findings that do not block admission but that a user would want to hear about.

They travel to kubectl as `Warning: 299 - "<text>"` headers, so each is one line under
`MAX_WARNING_LENGTH` characters, starts with the field it is about, and says what happens.
"""

from __future__ import annotations

from typing import Any

from policies.kinds import KindSpec, Replica

__all__ = ["MANY_REPLICAS", "MAX_WARNING_LENGTH", "warnings_for"]

MAX_WARNING_LENGTH = 120
MANY_REPLICAS = 1000
"""More replicas than this in one entry is warned about: each is a pod and a Service, and a
number this large is more often a typo than a plan (a node runs ~110 pods by default)."""


def warnings_for(kind: KindSpec, spec: dict[str, Any], replicas: list[Replica]) -> list[str]:
    """Non-fatal findings on a defaulted job's `spec`, each shorter than 120 characters."""
    found: list[str] = []
    main = kind.main_container
    for position, _, count, raw in replicas:
        if count is not None and count > MANY_REPLICAS:
            found.append(
                f"spec.replicaSpecs[{position}].replicas: {count} replicas make"
                f" {count} pods and Services; more than {MANY_REPLICAS} is unusual"
            )
        try:
            pod_spec = raw["template"]["spec"]
        except (KeyError, TypeError):  # absent, null or not an object
            continue
        if not isinstance(pod_spec, dict):
            continue
        if "restartPolicy" in pod_spec:
            path = f"spec.replicaSpecs[{position}]"
            found.append(
                f"{path}.template.spec.restartPolicy is ignored: {path}.restartPolicy applies"
            )
        containers = pod_spec.get("containers")
        if not isinstance(containers, list):
            continue
        for c in containers:
            if isinstance(c, dict) and c.get("name") == main:
                resources = c.get("resources")
                limits = resources.get("limits") if isinstance(resources, dict) else None
                if not limits:
                    found.append(
                        f'spec.replicaSpecs[{position}]: container "{main}" sets no resource'
                        " limits; it may use a whole node"
                    )
                break
    run_policy = spec.get("runPolicy")
    if (
        isinstance(run_policy, dict)
        and run_policy.get("cleanUpPolicy") == "None"
        and any(r.type == "ps" and (r.replicas or 0) > 0 for r in replicas)
    ):
        found.append(
            "spec.runPolicy.cleanUpPolicy None: parameter servers keep running (and holding"
            " resources) after the job ends"
        )
    run_mode = spec.get("runMode")
    if isinstance(run_mode, dict):
        debug, pause = run_mode.get("debug"), run_mode.get("pause")
        if isinstance(debug, dict) and debug.get("enabled") is True:
            found.append(
                "spec.runMode.debug.enabled: debug mode is on; replicas wait for you instead of training"
            )
        if isinstance(pause, dict) and pause.get("enabled") is True:
            found.append("spec.runMode.pause.enabled: the job is paused; it runs no replicas")
    return [_fit(w) for w in found] if found else found


def _fit(text: str) -> str:
    if len(text) < MAX_WARNING_LENGTH:
        return text
    return text[: MAX_WARNING_LENGTH - 4] + "..."
