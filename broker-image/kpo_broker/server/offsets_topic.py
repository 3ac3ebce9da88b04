"""Creation of ``__consumer_offsets`` on first use (Kafka's ``AutoTopicCreationManager``).

FindCoordinator asks for the topic when it does not exist yet: it is created with
``offsets.topic.num.partitions`` partitions, ``offsets.topic.replication.factor`` replicas
and ``cleanup.policy=compact``; the request is answered COORDINATOR_NOT_AVAILABLE until the
group's partition has a live leader.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from kpo_broker.coordinator.group.records import GROUP_METADATA_TOPIC_NAME

if TYPE_CHECKING:
    from kpo_broker.config import BrokerConfig
    from kpo_broker.server.topic_admin import TopicAdmin

__all__ = ["OffsetsTopicCreator"]

log = logging.getLogger(__name__)

_LEADER_NOT_AVAILABLE = 5
_TOPIC_ALREADY_EXISTS = 36
#: How long FindCoordinator waits before asking ZooKeeper to create the topic again, s.
_CREATE_RETRY_S = 1.0


class OffsetsTopicCreator:
    """Creates ``__consumer_offsets`` on demand, at most once per second.

    Args:
        config: the broker's configuration (the ``offsets.topic.*`` settings).
        topic_admin: creates topics through ZooKeeper.
    """

    def __init__(self, config: BrokerConfig, topic_admin: TopicAdmin) -> None:
        self.config = config
        self.topic_admin = topic_admin
        self._last_attempt = 0.0

    async def maybe_create(self) -> int:
        """Ask ZooKeeper to create the topic unless asked within the last second.

        Returns:
            LEADER_NOT_AVAILABLE while the topic is being created (as Metadata's
            auto-creation answers), or the creation's error (e.g.
            INVALID_REPLICATION_FACTOR with too few live brokers).
        """
        now = time.monotonic()
        if now - self._last_attempt < _CREATE_RETRY_S:
            return _LEADER_NOT_AVAILABLE
        self._last_attempt = now
        c = self.config
        result = await self.topic_admin.create_topic(
            GROUP_METADATA_TOPIC_NAME,
            c.offsets_topic_num_partitions,
            c.offsets_topic_replication_factor,
            None,
            {
                "cleanup.policy": "compact",
                "segment.bytes": str(c.offsets_topic_segment_bytes),
                "compression.type": "producer",
            },
            timeout_ms=0,
        )
        if result.error_code in (0, _TOPIC_ALREADY_EXISTS):
            return _LEADER_NOT_AVAILABLE
        log.info(
            "%s not created (error %d): %s",
            GROUP_METADATA_TOPIC_NAME,
            result.error_code,
            result.message,
        )
        return result.error_code
