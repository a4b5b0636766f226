"""XGBoostTrainingJob: replica types, main container, port, defaults and the master rule.

Sources: the T9k XGBoostTrainingJob reference (`shared/seeds/`): two replica types `master` and
`worker`, the master decides success and failure; the main container is named `xgboost`. Where
the seeds are silent, Kubeflow training-operator v1 behaviour: the `xgboostjob-port` port (9999)
behind `MASTER_PORT`, restart policy `Never` (`XGBoostJobDefaultRestartPolicy`) and clean-pod
policy `None` (XGBoostJob's defaulting keeps finished and running pods alike).
"""

from __future__ import annotations

from policies.fieldpath import FieldError, Path, invalid, required
from policies.kinds import KindSpec, Replica

__all__ = ["XGBOOST"]


def _validate_masters(replicas: list[Replica]) -> list[FieldError]:
    """Exactly one `master` spec, with exactly one replica (duplicates are the type rule's)."""
    masters = [r for r in replicas if r.type == "master"]
    if not masters:
        if any(r.type is None for r in replicas):
            return []  # the missing type might be the master; the type rule reports it
        return [
            required(
                Path.of("spec", "replicaSpecs"),
                'a replica spec of type "master" with 1 replica is required',
            )
        ]
    first = masters[0]
    if first.replicas is not None and first.replicas != 1:
        return [
            invalid(
                first.path.child("replicas"),
                first.replicas,
                "master must have exactly 1 replica: it is the master of the job",
            )
        ]
    return []


XGBOOST = KindSpec(
    kind="XGBoostTrainingJob",
    replica_types=("master", "worker"),
    main_container="xgboost",
    port_name="xgboostjob-port",
    default_port=9999,
    default_restart_policy="Never",
    default_clean_up_policy="None",
    validate_masters=_validate_masters,
)
