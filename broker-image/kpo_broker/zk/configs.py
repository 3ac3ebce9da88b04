"""Dynamic configs: the entity config value read back and the change notification op.

``/config/<entity type>/<name>`` holds an entity's overrides; each write also creates
a sequential ``/config/changes/config_change_<seq>`` notification in the same multi
(see :meth:`~kpo_broker.zk.client.KafkaZkClient.set_entity_config`), which brokers
follow in sequence order (Kafka's ``ZkNodeChangeNotificationListener``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kpo_broker.zk import paths
from kpo_broker.zk.data import ConfigChange, encode_config_change_notification
from kpo_broker.zk.ops import CreateOp


@dataclass(frozen=True)
class EntityConfig:
    """A config entity's overrides as read from ZooKeeper.

    Attributes:
        config: config name -> value, e.g. ``{"retention.ms": "86400000"}``.
        zk_version: the znode version for a compare-and-set write back; None when the
            entity has no config znode.
    """

    config: Mapping[str, str]
    zk_version: int | None


def config_change_notification_op(entity_type: str, name: str) -> CreateOp:
    """Return the operation creating the change notification of one entity's config.

    A sequential ``/config/changes/config_change_<seq>`` znode naming the entity
    (Kafka's version 2 notification, ``{"version":2,"entity_path":"<type>/<name>"}``).
    """
    return CreateOp(
        f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}",
        encode_config_change_notification(ConfigChange(entity_type, name)),
        sequence=True,
    )
