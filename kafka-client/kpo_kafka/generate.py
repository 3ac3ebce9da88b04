"""Propose a new replica assignment for whole topics, as ``kafka-reassign-partitions --generate``.

``--generate`` takes topics to move and a broker list and, for each topic, lets
Kafka's ``AdminUtils.assignReplicasToBrokers`` (the placement used at topic
creation, :func:`kpo_kafka.assignment.assign_replicas`) lay out the topic's
partitions again over the listed brokers, keeping the partition count and the
replication factor (RF). Rack-aware mode applies when every listed broker has a
``broker.rack``; some listed brokers with a rack and others without is an error
unless rack awareness is disabled, as Kafka's default ``RackAwareMode.Enforced`` does.

Determinism: Kafka draws ``start`` and the initial ``shift`` at random for every
topic. Here they come from ``random.Random("<seed>:<topic>")``, so one seed gives
one answer (tests, reviews, GitOps diffs) while different topics still start on
different brokers. An explicit ``start_index`` instead uses that value for both,
as Kafka's ``fixedStartIndex`` does.

:func:`parse_topics_to_move` reads ``--generate``'s other input, the topics-to-move
JSON. :meth:`ProposedMove.targets` keeps, by default, only the partitions whose
replicas change (Kafka prints every partition).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kpo_kafka.assignment import (
    BrokerListError,
    InconsistentBrokerRacksError,
    InvalidReplicationFactorError,
    assign_replicas,
)
from kpo_kafka.reassignment_json import topic_name_problem
from kpo_kafka.specs import PartitionTarget
from kpo_kafka.topic_partition import TopicPartition

Assignment = dict[TopicPartition, tuple[int, ...]]
"""``(topic, partition) -> replicas``, preferred leader first."""


class GenerateError(ValueError):
    """A move cannot be proposed for the given topics and brokers."""


class UnknownBrokerError(GenerateError):
    """The broker list names brokers that are not registered in the cluster.

    Attributes:
        brokers: The unknown ids, sorted.
    """

    def __init__(self, brokers: Iterable[int]) -> None:
        self.brokers = sorted(brokers)
        listed = ", ".join(map(str, self.brokers))
        super().__init__(f"brokers not in the cluster: {listed}")


class UnknownTopicError(GenerateError):
    """Topics to move do not exist (or have no partitions).

    Attributes:
        topics: The missing topic names, sorted.
    """

    def __init__(self, topics: Iterable[str]) -> None:
        self.topics = sorted(topics)
        super().__init__(f"topics not in the cluster: {', '.join(self.topics)}")


class TopicsToMoveError(GenerateError):
    """A topics-to-move JSON document is malformed; the message names the bad entry."""


def parse_topics_to_move(text: str) -> list[str]:
    """Parse Kafka's topics-to-move JSON, ``{"version": 1, "topics": [{"topic": "a"}]}``.

    The ``--topics-to-move-json-file`` input of ``kafka-reassign-partitions
    --generate``; a missing ``version`` means 1, as in Kafka.

    Returns:
        The topic names in the order given.

    Raises:
        TopicsToMoveError: Not JSON, another version, an empty list, unknown fields,
            a bad or repeated topic (every problem, each with its path, e.g. ``topics[1]``).
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TopicsToMoveError(f"line {exc.lineno} column {exc.colno}: {exc.msg}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("topics"), list):
        raise TopicsToMoveError('topics: missing; expected {"version": 1, "topics": [...]}')
    errors = [f"{key}: unknown field" for key in data if key not in ("version", "topics")]
    if data.get("version", 1) != 1:
        errors.append(f"version: unsupported version {data['version']!r} (only 1 is supported)")
    if not data["topics"]:
        errors.append("topics: the list of topics to move is empty")
    topics: list[str] = []
    for index, entry in enumerate(data["topics"]):
        if not isinstance(entry, dict) or set(entry) != {"topic"}:
            errors.append(f'topics[{index}]: must be an object with the single field "topic"')
        elif (problem := topic_name_problem(entry["topic"])) is not None:
            errors.append(f"topics[{index}].topic: {problem}")
        elif entry["topic"] in topics:
            errors.append(f"topics[{index}].topic: {entry['topic']} is listed twice")
        else:
            topics.append(entry["topic"])
    if errors:
        raise TopicsToMoveError("invalid topics-to-move JSON: " + "; ".join(errors))
    return topics


def assignment_targets(assignment: Mapping[TopicPartition, Sequence[int]]) -> list[PartitionTarget]:
    """Turn ``(topic, partition) -> replicas`` into targets sorted by topic and partition."""
    return [
        PartitionTarget(topic=topic, partition=partition, replicas=list(replicas))
        for (topic, partition), replicas in sorted(assignment.items())
    ]


@dataclass(frozen=True)
class ProposedMove:
    """The result of :func:`propose_move`, as ``--generate`` prints it.

    Attributes:
        current: The topics' current assignment ("Current partition replica assignment").
        proposed: The new assignment of every partition of the topics ("Proposed
            partition reassignment configuration").
        rack_aware: Whether the placement used the brokers' racks.
        notes: Warnings for the user (e.g. partitions with unequal RF).
    """

    current: Assignment
    proposed: Assignment
    rack_aware: bool
    notes: tuple[str, ...] = field(default=())

    def changed(self) -> Assignment:
        """Return the proposed replicas of the partitions whose replica list (or order) changes.

        A new order alone counts: it changes the preferred leader.
        """
        return {tp: r for tp, r in self.proposed.items() if self.current.get(tp) != r}

    def targets(self, all_partitions: bool = False) -> list[PartitionTarget]:
        """Return what goes in a manifest, sorted by topic and partition.

        Kafka's ``--generate`` proposes every partition (``all_partitions``); for an
        operator the partitions that stay put are only noise (their reassignment
        completes at once), so the default keeps those of :meth:`changed`.
        """
        return assignment_targets(self.proposed if all_partitions else self.changed())


def _check_broker_list(broker_list: Sequence[int], cluster: Mapping[int, str | None]) -> None:
    if not broker_list:
        raise BrokerListError("the broker list is empty")
    repeated = sorted(b for b, n in Counter(broker_list).items() if n > 1)
    if repeated:
        raise BrokerListError(f"the broker list names brokers more than once: {repeated}")
    negative = sorted(b for b in broker_list if b < 0)
    if negative:
        raise BrokerListError(f"broker ids must be >= 0: {negative}")
    unknown = set(broker_list) - set(cluster)
    if unknown:
        raise UnknownBrokerError(unknown)


def _topic_random(seed: int, topic: str) -> random.Random:
    return random.Random(f"{seed}:{topic}")  # a str seed goes through SHA-512: same draws every run


def propose_move(
    current: Mapping[str, Mapping[int, Sequence[int]]],
    topics: Sequence[str],
    broker_list: Sequence[int],
    cluster_brokers: Mapping[int, str | None],
    *,
    rack_aware: bool = True,
    start_index: int | None = None,
    seed: int = 0,
) -> ProposedMove:
    """Propose a new placement of every partition of ``topics`` over ``broker_list``.

    Each topic keeps its partition count and its RF, taken, as Kafka does, from
    its lowest partition (a note is added when its partitions differ in RF).

    Args:
        current: topic -> partition -> current replicas (Metadata); may hold more topics.
        topics: The topics to move, each once.
        broker_list: The brokers to place on (``--broker-list``).
        cluster_brokers: Every registered broker id -> its rack or ``None`` (DescribeCluster).
        rack_aware: ``False`` ignores racks (``--disable-rack-aware``).
        start_index: Kafka's ``fixedStartIndex`` for every topic, >= 0; ``None`` draws
            one per topic from ``seed`` (see the module docstring).
        seed: Seed of the per-topic draws when ``start_index`` is ``None``.

    Returns:
        The current and proposed assignments of all the topics' partitions.

    Raises:
        GenerateError: No topics, a repeated topic, or a negative ``start_index``.
        BrokerListError: Empty or repeated or negative broker ids.
        UnknownBrokerError: Brokers not in ``cluster_brokers``.
        UnknownTopicError: Topics not in ``current``, or without partitions.
        InconsistentBrokerRacksError: Only some listed brokers have a rack and ``rack_aware``.
        InvalidReplicationFactorError: A topic's RF exceeds the number of listed brokers.
    """
    if not topics:
        raise GenerateError("no topics to move")
    repeated = sorted(t for t, n in Counter(topics).items() if n > 1)
    if repeated:
        raise GenerateError(f"topics listed more than once: {', '.join(repeated)}")
    if start_index is not None and start_index < 0:
        raise GenerateError(f"start index must be >= 0, not {start_index}")
    _check_broker_list(broker_list, cluster_brokers)
    missing = [t for t in topics if not current.get(t)]
    if missing:
        raise UnknownTopicError(missing)
    with_rack = {b: r for b in broker_list if (r := cluster_brokers[b]) is not None}
    if rack_aware and with_rack and len(with_rack) != len(broker_list):
        without = sorted(set(broker_list) - set(with_rack))
        raise InconsistentBrokerRacksError(
            f"brokers {without} have no rack while others do; disable rack awareness "
            "(--disable-rack-aware) to place without racks"
        )
    racks = with_rack if rack_aware and with_rack else None
    current_assignment: Assignment = {}
    proposed: Assignment = {}
    notes: list[str] = []
    for topic in sorted(topics):
        partitions = current[topic]
        rf = len(partitions[min(partitions)])
        if len({len(r) for r in partitions.values()}) > 1:
            notes.append(
                f"topic {topic}: partitions have different replication factors; "
                f"all get {rf} (that of partition {min(partitions)})"
            )
        if rf > len(broker_list):
            raise InvalidReplicationFactorError(
                f"topic {topic}: replication factor {rf} is larger than the "
                f"{len(broker_list)} brokers in the broker list"
            )
        if start_index is None:
            draws = _topic_random(seed, topic)
            start, shift = draws.randrange(len(broker_list)), draws.randrange(len(broker_list))
        else:
            start = shift = start_index
        placed = assign_replicas(
            broker_list, partitions, rf, start_index=start, replica_shift=shift, racks=racks
        )
        for partition in sorted(partitions):
            current_assignment[TopicPartition(topic, partition)] = tuple(partitions[partition])
            proposed[TopicPartition(topic, partition)] = placed[partition]
    return ProposedMove(current_assignment, proposed, racks is not None, tuple(notes))
