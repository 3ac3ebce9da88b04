"""The Kafka 2.x znode layout, in one place.

Every znode path the brokers and the controller read or write is built here, so
that the layout (the "v3" paths of Kafka's replication design, as Kafka 2.x keeps them
in ``ZkData.scala``) is defined once.
Paths are relative to the chroot of the ``zookeeper.connect`` string.
"""

from __future__ import annotations

from kpo_broker.zk.errors import InvalidZNodeNameError

#: Ephemeral znodes of the live brokers: ``/brokers/ids/<id>``.
BROKER_IDS = "/brokers/ids"
#: Persistent znodes holding each topic's replica assignment (AR).
BROKER_TOPICS = "/brokers/topics"
#: Counter znode whose version hands out generated broker ids (``broker.id.generation.enable``).
BROKER_SEQUENCE_ID = "/brokers/seqid"
#: Ephemeral znode naming the active controller.
CONTROLLER = "/controller"
#: Persistent znode holding the controller epoch (a decimal string).
CONTROLLER_EPOCH = "/controller_epoch"
#: Children name the topics queued for deletion.
ADMIN_DELETE_TOPICS = "/admin/delete_topics"
#: The pending partition reassignment (ZooKeeper-based, written by ``kafka-reassign-partitions``).
ADMIN_REASSIGN_PARTITIONS = "/admin/reassign_partitions"
#: The pending preferred replica election.
ADMIN_PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
#: Sequential notifications of ISR changes written by partition leaders.
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
#: Name prefix of an ISR change notification znode (ZooKeeper appends a 10-digit sequence).
ISR_CHANGE_PREFIX = "isr_change_"
#: Failed log dirs are announced to the controller here (``LogDirEventNotificationZNode``).
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
#: Name prefix of its sequential children, ``log_dir_event_0000000003``.
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
#: Root of the dynamic configs: ``/config/<entity type>/<entity name>``.
CONFIG = "/config"
#: Sequential notifications of dynamic config changes.
CONFIG_CHANGES = "/config/changes"
#: Name prefix of a config change notification znode.
CONFIG_CHANGE_PREFIX = "config_change_"
#: The cluster id, created once by the first broker.
CLUSTER_ID = "/cluster/id"
#: The last block of producer ids claimed by a broker (idempotent producers, KIP-98).
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"

#: Config entity type of topic configs (``/config/topics/<topic>``).
CONFIG_TYPE_TOPICS = "topics"
#: Config entity type of broker configs (``/config/brokers/<id>`` or ``<default>``).
CONFIG_TYPE_BROKERS = "brokers"
#: Config entity type of client quotas.
CONFIG_TYPE_CLIENTS = "clients"
#: Config entity type of user quotas.
CONFIG_TYPE_USERS = "users"
#: All config entity types Kafka 2.x stores under ``/config``.
CONFIG_TYPES = (CONFIG_TYPE_TOPICS, CONFIG_TYPE_CLIENTS, CONFIG_TYPE_USERS, CONFIG_TYPE_BROKERS)
#: Entity name of the cluster-wide default broker config.
DEFAULT_BROKER_ENTITY = "<default>"

#: Persistent paths every broker creates at start-up (Kafka's ``createTopLevelPaths``),
#: so that watches on them can be set before anything is written below them.
PERSISTENT_PATHS = (
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_CHANGES,
    ADMIN_DELETE_TOPICS,
    BROKER_SEQUENCE_ID,
    ISR_CHANGE_NOTIFICATION,
    LATEST_PRODUCER_ID_BLOCK,
    *(f"{CONFIG}/{entity_type}" for entity_type in CONFIG_TYPES),
    LOG_DIR_EVENT_NOTIFICATION,
)


def _segment(name: str, what: str) -> str:
    """Return ``name`` if it is usable as one znode path segment.

    Raises:
        InvalidZNodeNameError: empty, ``.``/``..``, or contains ``/`` or NUL.
    """
    if not name or name in (".", "..") or "/" in name or "\x00" in name:
        raise InvalidZNodeNameError(f"invalid {what} for a znode path: {name!r}")
    return name


def broker_path(broker_id: int) -> str:
    """Return ``/brokers/ids/<id>``, the broker's ephemeral registration znode."""
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    """Return ``/brokers/topics/<topic>``, the topic's replica assignment znode.

    Raises:
        InvalidZNodeNameError: ``topic`` cannot be a single path segment.
    """
    return f"{BROKER_TOPICS}/{_segment(topic, 'topic')}"


def topic_partitions_path(topic: str) -> str:
    """Return ``/brokers/topics/<topic>/partitions``.

    Raises:
        InvalidZNodeNameError: ``topic`` cannot be a single path segment.
    """
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    """Return ``/brokers/topics/<topic>/partitions/<partition>``.

    Raises:
        InvalidZNodeNameError: ``topic`` cannot be a single path segment.
    """
    return f"{topic_partitions_path(topic)}/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    """Return ``/brokers/topics/<topic>/partitions/<partition>/state`` (LeaderAndIsr znode).

    Raises:
        InvalidZNodeNameError: ``topic`` cannot be a single path segment.
    """
    return f"{partition_path(topic, partition)}/state"


def delete_topic_path(topic: str) -> str:
    """Return ``/admin/delete_topics/<topic>``, the marker of a topic queued for deletion.

    Raises:
        InvalidZNodeNameError: ``topic`` cannot be a single path segment.
    """
    return f"{ADMIN_DELETE_TOPICS}/{_segment(topic, 'topic')}"


def isr_change_notification_path(name: str) -> str:
    """Return ``/isr_change_notification/<name>``, e.g. for ``isr_change_0000000003``.

    Raises:
        InvalidZNodeNameError: ``name`` cannot be a single path segment.
    """
    return f"{ISR_CHANGE_NOTIFICATION}/{_segment(name, 'notification')}"


def log_dir_event_notification_path(name: str) -> str:
    """Return ``/log_dir_event_notification/<name>``, e.g. for ``log_dir_event_0000000001``.

    Raises:
        InvalidZNodeNameError: ``name`` cannot be a single path segment.
    """
    return f"{LOG_DIR_EVENT_NOTIFICATION}/{_segment(name, 'notification')}"


def config_entity_type_path(entity_type: str) -> str:
    """Return ``/config/<entity type>``, e.g. ``/config/topics``.

    Raises:
        InvalidZNodeNameError: ``entity_type`` is not one of :data:`CONFIG_TYPES`.
    """
    if entity_type not in CONFIG_TYPES:
        raise InvalidZNodeNameError(f"unknown config entity type {entity_type!r}")
    return f"{CONFIG}/{entity_type}"


def config_entity_path(entity_type: str, name: str) -> str:
    """Return ``/config/<entity type>/<name>``, e.g. ``/config/brokers/<default>``.

    Raises:
        InvalidZNodeNameError: unknown entity type, or ``name`` cannot be a path segment.
    """
    return f"{config_entity_type_path(entity_type)}/{_segment(name, 'config entity')}"


def config_change_path(name: str) -> str:
    """Return ``/config/changes/<name>`` for a child such as ``config_change_0000000007``.

    Raises:
        InvalidZNodeNameError: ``name`` cannot be a single path segment.
    """
    return f"{CONFIG_CHANGES}/{_segment(name, 'notification')}"


def sequence_number(child_name: str, prefix: str) -> int:
    """Return the sequence number ZooKeeper appended to a sequential child's name.

    Args:
        child_name: e.g. ``"config_change_0000000042"``.
        prefix: the name prefix given at creation, e.g. :data:`CONFIG_CHANGE_PREFIX`.

    Raises:
        InvalidZNodeNameError: the name does not start with ``prefix`` followed by digits.
    """
    digits = child_name[len(prefix) :]
    if not child_name.startswith(prefix) or not digits.isdigit():
        raise InvalidZNodeNameError(f"{child_name!r} is not a {prefix}<sequence> znode")
    return int(digits)
