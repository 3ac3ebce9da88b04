"""Kafka's ``TopicPartition``: the one definition, for the broker, the operator and every client."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A topic name and a partition index from 0 (Kafka's ``TopicPartition``).

    A named tuple, so it equals (and hashes like) the plain ``(topic, partition)``
    tuple, sorts by topic then partition, and prints as ``<topic>-<partition>``.
    """

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
