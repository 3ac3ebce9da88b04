"""The ACLs each Admin API call needs, as Kafka's ``KafkaApis`` authorizes them (pure).

Apache Kafka checks one operation on one resource per request (or per resource of it);
a missing ACL is answered with TOPIC_AUTHORIZATION_FAILED (29), GROUP_AUTHORIZATION_FAILED
(30) or CLUSTER_AUTHORIZATION_FAILED (31). This table gives, for the calls the project
makes, what ``kafka-acls --add --allow-principal ... --operation <op>`` must grant
(Kafka 3.9, ``KafkaApis.handle*``, ``ConfigHelper``, ``AuthHelper``):

============================== ================ ==========================================
API                            operation        resource
============================== ================ ==========================================
Metadata                       Describe         Topic (each topic named)
DescribeCluster                Describe         Cluster (only for the authorized
                                                operations, KIP-430; the call itself is open)
ListPartitionReassignments     Describe         Cluster
AlterPartitionReassignments    Alter            Cluster
ElectLeaders                   Alter            Cluster
DescribeConfigs                DescribeConfigs  Cluster (broker configs), Topic (topic configs)
IncrementalAlterConfigs        AlterConfigs     Cluster (broker configs), Topic (topic configs)
DescribeLogDirs                Describe         Cluster
AlterReplicaLogDirs            Alter            Cluster
CreateTopics                   Create           Topic or Cluster
============================== ================ ==========================================

``kafka-cluster`` is the name of the one Cluster resource (``Resource.CLUSTER_NAME``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "AUTHORIZATION_ERRORS",
    "CLUSTER_NAME",
    "OPERATION_CODES",
    "REQUIRED",
    "AclRequirement",
    "decode_operations",
    "refusal",
]

CLUSTER_NAME = "kafka-cluster"
"""The name of Kafka's single Cluster resource (``Resource.CLUSTER_NAME``)."""

AUTHORIZATION_ERRORS = {
    29: "TOPIC_AUTHORIZATION_FAILED",
    30: "GROUP_AUTHORIZATION_FAILED",
    31: "CLUSTER_AUTHORIZATION_FAILED",
}
"""Kafka's error codes for a missing ACL (``Errors.java``)."""

OPERATION_CODES = {
    3: "Read",
    4: "Write",
    5: "Create",
    6: "Delete",
    7: "Alter",
    8: "Describe",
    9: "ClusterAction",
    10: "DescribeConfigs",
    11: "AlterConfigs",
    12: "IdempotentWrite",
    13: "CreateTokens",
    14: "DescribeTokens",
}
"""``AclOperation`` codes -> ``kafka-acls --operation`` names (0-2: UNKNOWN, ANY, ALL)."""

_NOT_PROVIDED = -(2**31)
"""``authorized_operations`` value meaning "not asked or not allowed to see" (INT32 min)."""


@dataclass(frozen=True)
class AclRequirement:
    """An operation an API needs on a resource type.

    Attributes:
        operation: ``kafka-acls --operation`` name, e.g. ``Alter``.
        resource_type: ``Cluster``, ``Topic`` or ``Group``.
    """

    operation: str
    resource_type: str


REQUIRED: dict[str, AclRequirement] = {
    "Metadata": AclRequirement("Describe", "Topic"),
    "DescribeCluster": AclRequirement("Describe", "Cluster"),
    "ListPartitionReassignments": AclRequirement("Describe", "Cluster"),
    "AlterPartitionReassignments": AclRequirement("Alter", "Cluster"),
    "ElectLeaders": AclRequirement("Alter", "Cluster"),
    "DescribeConfigs": AclRequirement("DescribeConfigs", "Cluster"),
    "IncrementalAlterConfigs": AclRequirement("AlterConfigs", "Cluster"),
    "DescribeLogDirs": AclRequirement("Describe", "Cluster"),
    "AlterReplicaLogDirs": AclRequirement("Alter", "Cluster"),
    "CreateTopics": AclRequirement("Create", "Topic"),
}
"""API name -> what it needs (for config APIs: on broker resources; topics need Topic)."""


def refusal(api: str, code: int | None = None, resources: tuple[str, ...] = ()) -> str:
    """Say what a refused call needed: ``<API> needs <operation> on <Type>:<name>``.

    E.g. ``AlterPartitionReassignments needs Alter on Cluster:kafka-cluster``.

    Args:
        api: the Admin API name (a key of :data:`REQUIRED`).
        code: the error code answered; 29 (TOPIC_AUTHORIZATION_FAILED) makes a config API's
            resource a Topic.
        resources: the resource names refused (topics), when known; the Cluster resource is
            always ``kafka-cluster``.
    """
    need = REQUIRED.get(api)
    if need is None:
        return f"{api} was refused"
    resource_type = "Topic" if code == 29 else need.resource_type
    if code == 31 and api in ("CreateTopics", "Metadata"):
        resource_type = "Cluster"
    if resource_type == "Cluster":
        names = f"Cluster:{CLUSTER_NAME}"
    elif resources:
        names = ", ".join(f"{resource_type}:{name}" for name in resources)
    else:
        names = f"the {resource_type}"
    return f"{api} needs {need.operation} on {names}"


def decode_operations(value: int | Iterable[int | str] | None) -> frozenset[str] | None:
    """Decode ``authorized_operations`` (KIP-430) into ``kafka-acls`` operation names.

    Accepts the wire's bit field (bit ``n`` set: ``AclOperation`` code ``n`` allowed), a
    collection of codes, or kafka-python's decoded names (``"ALTER_CONFIGS"``). Returns
    ``None`` for a field that was not provided (``None`` or INT32 min).
    """
    if value is None or value == _NOT_PROVIDED:
        return None
    if isinstance(value, int):
        return frozenset(name for code, name in OPERATION_CODES.items() if value & (1 << code))
    names: set[str] = set()
    for item in value:
        if isinstance(item, int):
            if item in OPERATION_CODES:
                names.add(OPERATION_CODES[item])
        else:
            camel = "".join(part.capitalize() for part in str(item).split("_"))
            if camel in OPERATION_CODES.values():
                names.add(camel)
    return frozenset(names)
