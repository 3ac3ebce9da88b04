"""Which ISR changes of an AlterPartition request the controller accepts (KIP-497).

A partition's leader no longer writes its ISR to ZooKeeper itself: it asks the
controller with AlterPartition, and the controller checks each change against the
partition state it holds before writing it (Kafka's
``KafkaController.tryProcessAlterPartition``, ZooKeeper mode). This module is that check,
pure: the controller (:meth:`KafkaController._process_alter_partition`) owns the
ZooKeeper write, the UpdateMetadata that follows and the answer.

The checks, in Kafka's order, for a change proposed under leader epoch ``e`` and
partition epoch ``p`` (the state znode version the leader knows):

1. the partition has no state here: UNKNOWN_TOPIC_OR_PARTITION;
2. ``e`` or ``p`` is newer than the controller's: NOT_CONTROLLER (this controller is
   likely stale; the leader looks for the current one and retries);
3. ``e`` is older: FENCED_LEADER_EPOCH;
4. the change is already the current state (a retry of an applied request): the
   current state is the answer, nothing is written;
5. ``p`` is older: INVALID_UPDATE_VERSION;
6. a leader recovering from an unclean election (KIP-704) proposes more than itself, or
   a recovered partition would go back to recovering: INVALID_REQUEST (no partition is
   ever recovering under this controller, which keeps no recovery state in ZooKeeper);
7. a proposed ISR member is not a live broker, is in controlled shutdown, or (v3,
   KIP-903) was seen under another broker epoch than its registration's:
   INELIGIBLE_REPLICA (OPERATION_NOT_ATTEMPTED before v2, KIP-841).

Everything else is accepted: it is written with a compare-and-set on ``p``.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass

from kafka import errors as kafka_errors

from kpo_broker.zk.model import LeaderAndIsr
from kpo_kafka.topic_partition import TopicPartition

#: ``leader_recovery_state`` of a partition whose leader was elected cleanly (KIP-704).
LEADER_RECOVERED = 0
#: ``leader_recovery_state`` of a leader recovering from an unclean election (KIP-704).
LEADER_RECOVERING = 1
#: A broker epoch the leader does not know (AlterPartition v3, KIP-903).
UNKNOWN_BROKER_EPOCH = -1

UNKNOWN_TOPIC_OR_PARTITION = int(kafka_errors.UnknownTopicOrPartitionError.errno)
NOT_CONTROLLER = int(kafka_errors.NotControllerError.errno)
FENCED_LEADER_EPOCH = int(kafka_errors.FencedLeaderEpochError.errno)
INVALID_UPDATE_VERSION = int(kafka_errors.InvalidUpdateVersionError.errno)
INVALID_REQUEST = int(kafka_errors.InvalidRequestError.errno)
INELIGIBLE_REPLICA = int(kafka_errors.IneligibleReplicaError.errno)
OPERATION_NOT_ATTEMPTED = int(kafka_errors.OperationNotAttemptedError.errno)
UNKNOWN_TOPIC_ID = int(kafka_errors.UnknownTopicIdError.errno)


@dataclass(frozen=True)
class ProposedIsr:
    """One partition's entry of an AlterPartition request.

    Attributes:
        leader_epoch: the leader epoch the change was computed under.
        isr: the proposed ISR, in the leader's order.
        partition_epoch: the state znode version the change replaces.
        broker_epochs: broker id -> the epoch the leader saw it under, for the members
            whose epoch it sent (v3, KIP-903); empty before v3.
        leader_recovery_state: :data:`LEADER_RECOVERED` or :data:`LEADER_RECOVERING`.
    """

    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    broker_epochs: Mapping[int, int]
    leader_recovery_state: int = LEADER_RECOVERED


@dataclass
class AlterPartitionDecision:
    """The outcome of checking one request's changes.

    Attributes:
        accepted: partition -> the state to write (conditional on its ``partition_epoch``).
        unchanged: partition -> its current state, for changes already applied.
        errors: partition -> Kafka error code.
    """

    accepted: dict[TopicPartition, LeaderAndIsr]
    unchanged: dict[TopicPartition, LeaderAndIsr]
    errors: dict[TopicPartition, int]


@dataclass
class AlterPartitionResult:
    """The controller's answer to one AlterPartition request.

    Attributes:
        partitions: partition -> Kafka error code, or its state after the request
            (written now, or already so).
        topic_ids: topic name -> Kafka topic id (None when the topic has none), for
            the topics of ``partitions`` (v2+ answers name topics by id).
        unknown_topic_ids: topic id the request named that no topic has -> its
            partition indexes (answered UNKNOWN_TOPIC_ID).
    """

    partitions: dict[TopicPartition, int | LeaderAndIsr]
    topic_ids: dict[str, str | None]
    unknown_topic_ids: dict[str, list[int]]


def decide_alter_partition(
    leader_id: int,
    proposals: Mapping[TopicPartition, ProposedIsr],
    current: Mapping[TopicPartition, LeaderAndIsr],
    live_broker_epochs: Mapping[int, int],
    shutting_down: Set[int],
    request_version: int,
) -> AlterPartitionDecision:
    """Check each proposed ISR against the controller's current state.

    Args:
        leader_id: the requesting broker, the partitions' leader.
        proposals: partition -> the change it asks for.
        current: partition -> the controller's state (partitions without one are unknown).
        live_broker_epochs: broker id -> broker epoch of every registered broker.
        shutting_down: brokers in controlled shutdown (not eligible to join an ISR).
        request_version: the AlterPartition version (the ineligible replica error code
            depends on it).

    Returns:
        The accepted changes, the ones already applied and the refused ones.
    """
    decision = AlterPartitionDecision({}, {}, {})
    ineligible_code = INELIGIBLE_REPLICA if request_version > 1 else OPERATION_NOT_ATTEMPTED
    for tp, proposed in proposals.items():
        state = current.get(tp)
        if state is None:
            decision.errors[tp] = UNKNOWN_TOPIC_OR_PARTITION
        elif (
            proposed.partition_epoch > state.partition_epoch
            or proposed.leader_epoch > state.leader_epoch
        ):
            decision.errors[tp] = NOT_CONTROLLER
        elif proposed.leader_epoch < state.leader_epoch:
            decision.errors[tp] = FENCED_LEADER_EPOCH
        elif (
            state.leader == leader_id
            and proposed.isr == state.isr
            and proposed.leader_recovery_state == LEADER_RECOVERED
        ):
            decision.unchanged[tp] = state
        elif proposed.partition_epoch < state.partition_epoch:
            decision.errors[tp] = INVALID_UPDATE_VERSION
        elif proposed.leader_recovery_state != LEADER_RECOVERED:
            # Recovering with an ISR beyond the leader is refused (KIP-704), and so is
            # going from recovered (every partition here) back to recovering.
            decision.errors[tp] = INVALID_REQUEST
        elif not _eligible(proposed, live_broker_epochs, shutting_down):
            decision.errors[tp] = ineligible_code
        else:
            decision.accepted[tp] = LeaderAndIsr(
                leader_id, proposed.leader_epoch, proposed.isr, proposed.partition_epoch
            )
    return decision


def _eligible(
    proposed: ProposedIsr, live_broker_epochs: Mapping[int, int], shutting_down: Set[int]
) -> bool:
    for broker_id in proposed.isr:
        epoch = live_broker_epochs.get(broker_id)
        if epoch is None or broker_id in shutting_down:
            return False
        seen = proposed.broker_epochs.get(broker_id, UNKNOWN_BROKER_EPOCH)
        if seen != UNKNOWN_BROKER_EPOCH and seen != epoch:
            return False
    return True
