"""What differs between the two training-job kinds, as data.

Both kinds share one spec shape (`replicaSpecs`, `runPolicy`, `runMode`, `scheduler`, …); they
differ only in their replica types, the name of the main container, the port the framework
talks on, the defaults, and who the master is. `KindSpec` captures exactly that, so the shared
rules in `rules_common` and the defaulting in `defaults` never branch on the kind name, and a
third kind is one new module (`tensorflow.py` and `xgboost.py` are the two instances).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from policies.fieldpath import FieldError, Path

__all__ = ["KindSpec", "Replica", "replicas_of"]


class Replica(NamedTuple):
    """One entry of `spec.replicaSpecs`, with its well-typed parts pulled out.

    `type` is None when missing or not a string, `replicas` None when not an integer: the
    structural check reports such type errors, and the rules skip what they cannot read.
    (A NamedTuple rather than a frozen dataclass: built per replica per admission, 4x cheaper.)
    """

    position: int  # in spec.replicaSpecs (not `index`: that is tuple.index)
    type: str | None
    replicas: int | None
    raw: dict[str, Any]

    @property
    def path(self) -> Path:
        return Path.of("spec", "replicaSpecs", self.position)


@dataclass(frozen=True)
class KindSpec:
    """The per-kind facts the shared defaulting and rules are parameterised by."""

    kind: str
    replica_types: tuple[str, ...]
    main_container: str
    port_name: str
    default_port: int
    default_restart_policy: str
    default_clean_up_policy: str
    # The master-presence rule: replicas of well-typed entries -> errors.
    validate_masters: Callable[[list[Replica]], list[FieldError]]


def replicas_of(obj: dict[str, Any]) -> list[Replica]:
    """The dict entries of `spec.replicaSpecs` (non-dicts are the structural check's business)."""
    spec = obj.get("spec")
    items = spec.get("replicaSpecs") if isinstance(spec, dict) else None
    if not isinstance(items, list):
        return []
    out: list[Replica] = []
    for i, item in enumerate(items):
        if isinstance(item, dict):
            rtype = item.get("type")
            count = item.get("replicas")
            if not isinstance(rtype, str):
                rtype = None
            if not isinstance(count, int) or isinstance(count, bool):
                count = None
            # tuple.__new__ skips the NamedTuple's Python-level __new__: half the cost, once per
            # replica spec per admission.
            out.append(_new_tuple(Replica, (i, rtype, count, item)))
    return out


_new_tuple = tuple.__new__
