"""Inter-broker APIs of the ZooKeeper-mode controller, defined with kafka-python's codecs.

kafka-python (3.x) builds every protocol message from a JSON schema: a subclass
of ``kafka.protocol.api_message.ApiMessage`` loads ``<ClassName>.json`` from the
package named by the class keyword ``load_json=``. kafka-python ships no schema
for the four APIs only brokers and the controller use, so this module points
``load_json`` at :mod:`kpo_broker.protocol.schemas`, where they are written
after the Apache Kafka protocol documentation.

Declared versions (request and response alike; "flexible" means the KIP-482
compact encoding with tagged fields, request header v2 and response header v1):

* LeaderAndIsr (api key 4), v0-v4, flexible from v4. v1 adds ``is_new``; v2
  adds ``broker_epoch`` (KIP-380) and groups partition states by topic; v3
  adds ``adding_replicas``/``removing_replicas`` (KIP-455).
* StopReplica (api key 5), v0-v3, flexible from v2. v1 adds ``broker_epoch``
  and groups partitions by topic; v3 moves ``delete_partition`` into each
  partition and adds its ``leader_epoch`` (KIP-570).
* UpdateMetadata (api key 6), v0-v7, flexible from v6. v1 adds endpoints,
  v2 the rack, v3 the listener name, v4 ``offline_replicas``, v5
  ``broker_epoch`` and grouping by topic, v7 each topic's ``topic_id`` (KIP-516).
* ControlledShutdown (api key 7), v1-v3, flexible from v3. v2 adds
  ``broker_epoch``. v0, whose request header lacks the client id, is not
  declared.
* AlterPartition (api key 56, KIP-497), v0-v3, flexible in every version. v1
  adds ``leader_recovery_state`` (KIP-704), v2 names topics by ``topic_id``
  instead of ``topic_name`` (KIP-841), v3 replaces ``new_isr`` by
  ``new_isr_with_epochs`` (KIP-903).

Nested struct types are reachable as class attributes named after the schema
type, for example ``LeaderAndIsrRequest.LeaderAndIsrTopicState`` and
``UpdateMetadataRequest.UpdateMetadataEndpoint``; fields use snake_case names
(``zk_version``, ``leader_epoch``, ``is_new``...). Source: Kafka's ``KafkaController``
(its LeaderAndIsr/StopReplica commands, sent by ``ControllerChannelManager``), Kafka
protocol guide.
"""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

_SCHEMAS = "kpo_broker.protocol.schemas"

__all__ = [
    "AlterPartitionRequest",
    "AlterPartitionResponse",
    "ControlledShutdownRequest",
    "ControlledShutdownResponse",
    "LeaderAndIsrLiveLeader",
    "LeaderAndIsrPartitionError",
    "LeaderAndIsrPartitionState",
    "LeaderAndIsrRequest",
    "LeaderAndIsrResponse",
    "LeaderAndIsrTopicState",
    "RemainingPartition",
    "StopReplicaPartitionError",
    "StopReplicaPartitionState",
    "StopReplicaRequest",
    "StopReplicaResponse",
    "StopReplicaTopicState",
    "UpdateMetadataBroker",
    "UpdateMetadataEndpoint",
    "UpdateMetadataPartitionState",
    "UpdateMetadataRequest",
    "UpdateMetadataResponse",
    "UpdateMetadataTopicState",
]


class LeaderAndIsrRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """Controller -> broker: the leader, ISR and replica set of each partition it hosts.

    Top-level fields: ``controller_id``, ``controller_epoch``, ``broker_epoch``
    (v2+), ``ungrouped_partition_states`` (v0-v1) or ``topic_states`` (v2+,
    each ``topic_name`` + ``partition_states``), ``live_leaders`` (``broker_id``,
    ``host_name``, ``port``). A partition state carries ``partition_index``,
    ``controller_epoch``, ``leader``, ``leader_epoch``, ``isr``, ``zk_version``
    (partition epoch), ``replicas``, ``adding_replicas``/``removing_replicas``
    (v3+) and ``is_new`` (v1+).
    """


class LeaderAndIsrResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """Broker -> controller: ``error_code`` and per-partition ``partition_errors``."""


class StopReplicaRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """Controller -> broker: stop (and optionally delete) replicas.

    v3 shape: ``controller_id``, ``controller_epoch``, ``broker_epoch``,
    ``topic_states`` (``topic_name``, ``partition_states`` of
    ``partition_index``, ``leader_epoch``, ``delete_partition``). v1-v2 carry
    one request-wide ``delete_partitions`` and ``topics`` (``name``,
    ``partition_indexes``); v0 ``ungrouped_partitions``.
    """


class StopReplicaResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """Broker -> controller: ``error_code`` and per-partition ``partition_errors``."""


class UpdateMetadataRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """Controller -> every broker: the cluster metadata cache contents.

    v5+ shape: ``controller_id``, ``controller_epoch``, ``broker_epoch``,
    ``topic_states`` (``topic_name``, ``partition_states`` with the
    LeaderAndIsr partition fields plus ``offline_replicas``) and
    ``live_brokers`` (``id``, ``endpoints`` of ``port``, ``host``, ``listener``,
    ``security_protocol``; ``rack``).
    """


class UpdateMetadataResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """Broker -> controller: ``error_code``."""


class ControlledShutdownRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """Broker -> controller: ``broker_id`` (``broker_epoch`` from v2) asks to move leaders away."""


class ControlledShutdownResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """Controller -> broker: ``error_code`` and ``remaining_partitions`` it still leads."""


class AlterPartitionRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """Leader -> controller: ISR changes of partitions it leads (Kafka's ``AlterPartitionManager``).

    Top-level fields: ``broker_id``, ``broker_epoch``, ``topics`` (each ``topic_name``
    (v0-v1) or ``topic_id`` (v2+) and ``partitions``). A partition carries
    ``partition_index``, ``leader_epoch``, ``new_isr`` (v0-v2) or
    ``new_isr_with_epochs`` (v3+, each ``broker_id`` and ``broker_epoch``),
    ``leader_recovery_state`` (v1+) and ``partition_epoch`` (the state znode version).
    """


class AlterPartitionResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """Controller -> leader: ``error_code`` and, per partition, its error or new state.

    A partition entry carries ``partition_index``, ``error_code``, ``leader_id``,
    ``leader_epoch``, ``isr``, ``leader_recovery_state`` (v1+) and ``partition_epoch``.
    """


# The nested struct classes of the grouped (current) request shapes, named as in
# the schemas. A struct used in two places (for example the partition state of
# v0-v1 ungrouped and v2+ grouped LeaderAndIsr) gets one class per place from
# kafka-python; these names are the ones decoding produces for the grouped shape.
LeaderAndIsrTopicState = LeaderAndIsrRequest.LeaderAndIsrTopicState
LeaderAndIsrPartitionState = LeaderAndIsrTopicState.LeaderAndIsrPartitionState
LeaderAndIsrLiveLeader = LeaderAndIsrRequest.LeaderAndIsrLiveLeader
LeaderAndIsrPartitionError = LeaderAndIsrResponse.LeaderAndIsrPartitionError
StopReplicaTopicState = StopReplicaRequest.StopReplicaTopicState
StopReplicaPartitionState = StopReplicaTopicState.StopReplicaPartitionState
StopReplicaPartitionError = StopReplicaResponse.StopReplicaPartitionError
UpdateMetadataTopicState = UpdateMetadataRequest.UpdateMetadataTopicState
UpdateMetadataPartitionState = UpdateMetadataTopicState.UpdateMetadataPartitionState
UpdateMetadataBroker = UpdateMetadataRequest.UpdateMetadataBroker
UpdateMetadataEndpoint = UpdateMetadataBroker.UpdateMetadataEndpoint
RemainingPartition = ControlledShutdownResponse.RemainingPartition
