"""TensorFlowTrainingJob: replica types, main container, port, defaults and the master rule.

Sources: the T9k TensorFlowTrainingJob reference and user guide (`shared/seeds/`): four replica
types `chief`, `worker`, `ps`, `evaluator`; the main container is named `tensorflow`; the chief
is the master, else worker 0 is. Where the seeds are silent, Kubeflow training-operator v1
behaviour: the `tfjob-port` port (2222) that `TF_CONFIG` addresses, restart policy `Never`
(`TFJobDefaultRestartPolicy`) and clean-pod policy `Running` (T9k's `Unfinished`: delete the
replicas still running when the job ends, such as parameter servers that never exit).
"""

from __future__ import annotations

from policies.fieldpath import FieldError, Path, invalid, required
from policies.kinds import KindSpec, Replica

__all__ = ["TENSORFLOW"]


def _validate_masters(replicas: list[Replica]) -> list[FieldError]:
    """A chief with exactly one replica, or at least one worker; at most one evaluator."""
    errors: list[FieldError] = []
    chiefs = [r for r in replicas if r.type == "chief"]
    for r in chiefs:
        if r.replicas is not None and r.replicas != 1:
            errors.append(
                invalid(
                    r.path.child("replicas"),
                    r.replicas,
                    "chief must have exactly 1 replica: it is the master of the job",
                )
            )
    for r in replicas:
        if r.type == "evaluator" and r.replicas is not None and r.replicas > 1:
            errors.append(
                invalid(
                    r.path.child("replicas"), r.replicas, "evaluator may have at most 1 replica"
                )
            )
    if chiefs or any(r.type is None for r in replicas):
        return errors
    workers = [r for r in replicas if r.type == "worker"]
    if any(r.replicas is None for r in workers):
        return errors  # a worker count of the wrong type: the structural check reports it
    if sum(r.replicas or 0 for r in workers) == 0:
        errors.append(
            required(
                Path.of("spec", "replicaSpecs"),
                "a chief (1 replica) or at least 1 worker replica is required: "
                "the chief, else worker 0, is the master",
            )
        )
    return errors


TENSORFLOW = KindSpec(
    kind="TensorFlowTrainingJob",
    replica_types=("chief", "worker", "ps", "evaluator"),
    main_container="tensorflow",
    port_name="tfjob-port",
    default_port=2222,
    default_restart_policy="Never",
    default_clean_up_policy="Unfinished",
    validate_masters=_validate_masters,
)
