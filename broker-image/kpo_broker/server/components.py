"""What request handlers are given: the broker's components.

Each request also comes with its :class:`~kpo_broker.server.request_context.RequestContext`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kpo_broker.server.auth_helper import AuthHelper

if TYPE_CHECKING:
    from kpo_broker.config import BrokerConfig
    from kpo_broker.coordinator.group.coordinator import GroupCoordinator
    from kpo_broker.log.manager import LogManager
    from kpo_broker.protocol.client import StreamConnector
    from kpo_broker.security.credentials import CredentialCache
    from kpo_broker.server.dynamic_config import TopicConfigs
    from kpo_broker.server.fetch_session import FetchManager
    from kpo_broker.server.fetcher import ReplicaFetcherManager
    from kpo_broker.server.log_dir_mover import LogDirMover
    from kpo_broker.server.metadata_cache import MetadataCache
    from kpo_broker.server.offsets_topic import OffsetsTopicCreator
    from kpo_broker.server.producer_ids import ProducerIdManager
    from kpo_broker.server.replica_manager import ReplicaManager
    from kpo_broker.server.replication_quota import ReplicationQuotas
    from kpo_broker.server.topic_admin import TopicAdmin
    from kpo_broker.zk.client import KafkaZkClient


@dataclass
class BrokerComponents:
    """The running broker's parts, shared by every request handler.

    Attributes:
        config: the static broker configuration.
        broker_id: ``broker.id``.
        broker_epoch: czxid of this broker's registration znode (KIP-380).
        log_manager: the logs of every hosted replica.
        replica_manager: hosted partitions, produce and fetch.
        metadata_cache: cluster view from the controller's UpdateMetadata requests.
        zk: the ZooKeeper client.
        topic_configs: per-topic dynamic configs (``/config/topics``).
        topic_admin: topic creation, deletion and partition additions through ZooKeeper.
        fetchers: replica fetchers for the partitions this broker follows.
        controller: the controller component (active or standby).
        producer_ids: hands out producer ids (InitProducerId, KIP-98).
        supported_apis: api key -> (min, max) versions this broker serves.
        log_dir_mover: copies replicas between this broker's log dirs (KIP-113).
        replication_quotas: leader- and follower-side replication quotas (KIP-73); None
            means replication is never throttled.
        inter_broker_connector: opens this broker's connections to other brokers with the
            inter-broker listener's security; None = PLAINTEXT.
        credentials: the SCRAM credentials of every user (``/config/users``).
        group_coordinator: the consumer group coordinator (None until started).
        offsets_topic_creator: creates ``__consumer_offsets`` on the first FindCoordinator.
        auth: the authorization checks (``authorizer.class.name``; none = all allowed).
        fetch_manager: the incremental fetch sessions (KIP-227); None serves every
            Fetch sessionless.
    """

    config: BrokerConfig
    broker_id: int
    broker_epoch: int
    log_manager: LogManager
    replica_manager: ReplicaManager
    metadata_cache: MetadataCache
    zk: KafkaZkClient
    topic_configs: TopicConfigs
    topic_admin: TopicAdmin
    fetchers: ReplicaFetcherManager
    controller: Any
    producer_ids: ProducerIdManager
    supported_apis: dict[int, tuple[int, int]] = field(default_factory=dict)
    log_dir_mover: LogDirMover | None = None
    replication_quotas: ReplicationQuotas | None = None
    inter_broker_connector: StreamConnector | None = None
    credentials: CredentialCache | None = None
    group_coordinator: GroupCoordinator | None = None
    offsets_topic_creator: OffsetsTopicCreator | None = None
    auth: AuthHelper = field(default_factory=AuthHelper)
    fetch_manager: FetchManager | None = None
