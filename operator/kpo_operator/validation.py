"""Validate a PartitionReassignment against the cluster, as ReassignPartitionsCommand does.

Kafka's ``kafka-reassign-partitions --execute``
(``ReassignPartitionsCommand.executeAssignment``) refuses a reassignment JSON when: the
partition list is empty; a partition is listed twice; a partition's replica list is empty or
names a broker twice; ``log_dirs`` does not have one entry per replica; a topic/partition
does not exist; a target broker is not alive; or a reassignment is already in flight. The
operator applies the same rules, with two refinements: the in-flight check is per partition
(KIP-455 allows concurrent reassignments of different partitions) and ignores partitions
this object itself already submitted (the operator may restart mid-move); and a named log
dir must be one of the broker's log dirs (AlterReplicaLogDirs would otherwise fail with
LOG_DIR_NOT_FOUND).

Every problem is reported, each naming its entry, e.g.
``spec.partitions[2]: broker 7 is not alive``; nothing is validated lazily.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from kpo_kafka.specs import ANY_LOG_DIR, PartitionReassignmentSpec
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.model import ClusterView

BROKER_FENCED = "BrokerFenced"
"""Reason of a reassignment refused because a target broker is fenced (KIP-1073)."""


def failure_reason(issues: list[ValidationIssue]) -> str:
    """Return the reason the conditions give for ``issues``: a specific one if any, else generic."""
    return next((i.reason for i in issues if i.reason != "ValidationFailed"), "ValidationFailed")


@dataclass(frozen=True)
class ValidationIssue:
    """One reason a spec cannot be executed.

    Attributes:
        path: The offending field, e.g. ``spec.partitions[2]`` or ``spec.partitions``.
        message: What is wrong, naming the topic/partition or broker.
        reason: The CamelCase reason of the object's conditions for this problem:
            :data:`BROKER_FENCED` for a fenced target broker, else ``ValidationFailed``.
    """

    path: str
    message: str
    reason: str = "ValidationFailed"

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def validate_reassignment(
    spec: PartitionReassignmentSpec, view: ClusterView, owner: str
) -> list[ValidationIssue]:
    """Check ``spec`` against ``view``; an empty list means it can be submitted.

    Args:
        spec: The parsed spec.
        view: The cluster as Metadata, ListPartitionReassignments and DescribeLogDirs
            report it. ``view.log_dirs`` must hold each live broker named with a log dir.
        owner: This object's ``namespace/name``; partitions in ``view.reassigning``
            owned by it are not a conflict (it submitted them before).

    Returns:
        The issues in entry order, one per problem found.
    """
    issues: list[ValidationIssue] = []
    if not spec.partitions:
        issues.append(ValidationIssue("spec.partitions", "partition reassignment list is empty"))
        return issues
    counts: Counter[TopicPartition] = Counter(t.key for t in spec.partitions)
    for index, target in enumerate(spec.partitions):
        path = f"spec.partitions[{index}]"
        name = f"{target.topic}-{target.partition}"

        def add(message: str, path: str = path) -> None:
            issues.append(ValidationIssue(path, message))

        if counts[target.key] > 1:
            add(f"partition {name} is listed {counts[target.key]} times")
        if not target.replicas:
            add(f"partition {name} has an empty replica list")
        duplicates = sorted(b for b, n in Counter(target.replicas).items() if n > 1)
        for broker in duplicates:
            add(f"broker {broker} appears more than once in the replicas of {name}")
        if target.log_dirs is not None and len(target.log_dirs) != len(target.replicas):
            add(
                f"logDirs has {len(target.log_dirs)} entries but replicas has "
                f"{len(target.replicas)} for {name}",
                f"{path}.logDirs",
            )
        if view.partition(target.topic, target.partition) is None:
            if target.topic not in view.topics:
                add(f"topic {target.topic} does not exist")
            else:
                add(f"partition {name} does not exist")
        for broker in dict.fromkeys(target.replicas):
            if broker in view.fenced_brokers:
                issues.append(
                    ValidationIssue(
                        path,
                        f"broker {broker} is fenced (registered, but the controller fenced it; "
                        "DescribeCluster)",
                        BROKER_FENCED,
                    )
                )
            elif broker not in view.live_brokers:
                add(f"broker {broker} is not alive")
        if target.log_dirs is not None:
            for broker, log_dir in zip(target.replicas, target.log_dirs, strict=False):
                if log_dir == ANY_LOG_DIR or broker not in view.live_brokers:
                    continue
                known = view.log_dirs.get(broker)
                if known is None:
                    add(f"log dirs of broker {broker} are not known", f"{path}.logDirs")
                elif log_dir not in known:
                    add(f"broker {broker} has no log dir {log_dir}", f"{path}.logDirs")
        if target.key in view.reassigning:
            holder = view.reassigning[target.key]
            if holder is None:
                add(f"a reassignment of {name} not made by this operator is in flight")
            elif holder != owner:
                add(f"a reassignment of {name} by {holder} is in flight")
    return issues
