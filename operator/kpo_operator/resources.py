"""Names of the project's custom resources (``crds/``), in one place.

The API group ``kpo.dev`` shares the project's prefix; every kind is namespaced and
served as ``v1alpha1``. A KafkaCluster is a connection (bootstrap servers, client
security, Secret references) that the other kinds name in ``spec.clusterRef``; a
BalancingPolicy heals and balances one Kafka cluster by writing PartitionReassignments.
"""

from __future__ import annotations

from dataclasses import dataclass

GROUP = "kpo.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"


@dataclass(frozen=True)
class ResourceKind:
    """One custom resource kind: its kind name, plural and short names."""

    kind: str
    plural: str
    short_names: tuple[str, ...]

    @property
    def crd_name(self) -> str:
        """The CustomResourceDefinition's name, ``<plural>.<group>``."""
        return f"{self.plural}.{GROUP}"


PARTITION_REASSIGNMENT = ResourceKind(
    "PartitionReassignment", "partitionreassignments", ("pr", "preassign")
)
TOPIC_REPLICA_QUOTA = ResourceKind("TopicReplicaQuota", "topicreplicaquotas", ("trq",))

KAFKA_CLUSTER = ResourceKind("KafkaCluster", "kafkaclusters", ("kc",))

BALANCING_POLICY = ResourceKind("BalancingPolicy", "balancingpolicies", ("bp",))

ALL_KINDS = (PARTITION_REASSIGNMENT, TOPIC_REPLICA_QUOTA, KAFKA_CLUSTER, BALANCING_POLICY)
