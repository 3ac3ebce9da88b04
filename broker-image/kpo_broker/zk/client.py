"""``KafkaZkClient``: the brokers' and the controller's access to ZooKeeper.

Kafka's ``KafkaZkClient``: one class holding every operation on Kafka's znodes, sent
through one :class:`~kpo_broker.zk.session.ZkSession` (Kafka's ``ZooKeeperClient``:
the connection, pipelined requests, controller-epoch fencing). The znode layout is in
:mod:`~kpo_broker.zk.paths`, the value types in :mod:`~kpo_broker.zk.model`, the JSON
formats in :mod:`~kpo_broker.zk.data` and :mod:`~kpo_broker.zk.producer_ids`; the
operations, by section:

- brokers: registration and broker epochs, ``/brokers/seqid``, ``/cluster/id``;
- controller: election on ``/controller`` and the epoch in ``/controller_epoch``;
- topics: creation, replica assignments (AR), deletion;
- partition states: batched, fenced LeaderAndIsr reads and writes;
- admin: ISR change notifications, partition reassignment, preferred replica election;
- configs: dynamic configs and their change notifications;
- producer ids: blocks of producer ids for idempotent producers (KIP-98);
- watches: children and data watches delivering bare events.

Controller election: the first broker to create the ephemeral ``/controller`` znode is
the controller. Creating it and bumping ``/controller_epoch`` with a compare-and-set on
that znode's version happen in one multi (Kafka 2.x,
``registerControllerAndIncrementControllerEpoch``), so a broker never holds
``/controller`` without having bumped the epoch: there is nothing to undo when it
loses. The new epoch's znode version is the fence of every later controller write.

Topics: ``/brokers/topics/<topic>`` holds the topic's replica assignment, topic configs
live in ``/config/topics/<topic>``, and ``/admin/delete_topics/<topic>`` queues a topic
for deletion (Kafka's ``TopicCommand``/``AdminZkClient`` write them; the controller
watches them).

Partition states: ``/brokers/topics/<t>/partitions/<p>/state`` holds the leader, leader
epoch, ISR and the controller epoch; its znode version is the partition epoch. The
controller writes many at once (topic creation, broker failure): each partition's
write is fenced by ``check /controller_epoch version`` so that a stale controller is
fenced; up to 500 partitions share one multi and the multis are pipelined, so 10K
partitions cost a few requests and round trips, not 10K; a multi that one conflicting
partition aborts is sent again one partition per multi, so each partition still
succeeds or conflicts on its own (Kafka sends one multi per partition). The leader of
a partition updates the ISR with a compare-and-set on the same znode (Kafka's
``Partition.maybeShrinkIsr``/``maybeExpandIsr`` before KIP-497).

Admin: partition leaders announce ISR changes in sequential
``/isr_change_notification`` znodes, and brokers whose log dir failed announce it in
``/log_dir_event_notification``, znodes that the controller reads and deletes; admin tools
queue a reassignment in ``/admin/reassign_partitions`` (``kafka-reassign-partitions``)
or a preferred replica election in ``/admin/preferred_replica_election``, which the
controller deletes when done.

Configs: a config write and its change notification (``config_change_<seq>``) go in
one multi, so a broker that sees the notification always reads the new config (Kafka
writes them one after the other in ``AdminZkClient.changeConfigs``). Brokers follow the
notifications in sequence order (Kafka's ``ZkNodeChangeNotificationListener``).

Producer ids: brokers hand out producer ids (InitProducerId) from blocks they claim
with a compare-and-set on ``/latest_producer_id_block``, retrying when another broker
won the race (Kafka's ``ZkProducerIdManager.getNewProducerIdBlock``).

Watches: see :mod:`~kpo_broker.zk.watches`; kazoo's recipes re-arm themselves after
each trigger, after a reconnection and on the new session after an expiry. Callbacks
run on kazoo's threads and must not block.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, ZookeeperError

from kpo_broker.zk import paths
from kpo_broker.zk.configs import EntityConfig, config_change_notification_op
from kpo_broker.zk.data import (
    ConfigChange,
    decode_broker_registration,
    decode_cluster_id,
    decode_config_change_notification,
    decode_controller,
    decode_controller_epoch,
    decode_entity_config,
    decode_isr_change_notification,
    decode_log_dir_event_notification,
    decode_partition_reassignment,
    decode_partition_state,
    decode_preferred_replica_election,
    decode_topic_assignment,
    decode_topic_id,
    encode_broker_registration,
    encode_cluster_id,
    encode_controller,
    encode_controller_epoch,
    encode_entity_config,
    encode_isr_change_notification,
    encode_log_dir_event_notification,
    encode_partition_reassignment,
    encode_partition_state,
    encode_preferred_replica_election,
    encode_topic_assignment,
    new_topic_id,
)
from kpo_broker.zk.errors import (
    BrokerIdAlreadyRegisteredError,
    ControllerMovedError,
    MalformedZNodeDataError,
    PreferredReplicaElectionInProgressError,
    ReassignmentInProgressError,
    TopicAlreadyExistsError,
    ZkOperationError,
)
from kpo_broker.zk.model import (
    INITIAL_CONTROLLER_EPOCH,
    INITIAL_PARTITION_EPOCH,
    BrokerRegistration,
    ControllerEpoch,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicAssignment,
)
from kpo_broker.zk.ops import CreateOp, DeleteOp, Op, SetDataOp, multi_error
from kpo_broker.zk.partition_states import (
    PartitionStateWriteResult,
    create_partition_state_ops,
    state_path,
    update_partition_state_op,
)
from kpo_broker.zk.pipeline import DEFAULT_MAX_IN_FLIGHT_REQUESTS
from kpo_broker.zk.producer_ids import (
    PRODUCER_ID_BLOCK_SIZE,
    ProducerIdBlock,
    decode_producer_id_block,
    encode_producer_id_block,
    next_producer_id_block,
)
from kpo_broker.zk.security import ZkClientSecurity
from kpo_broker.zk.session import (
    DEFAULT_SESSION_TIMEOUT_MS,
    ZkRequestStats,
    ZkSession,
    ZkSessionState,
    multi_results,
)
from kpo_broker.zk.watches import WatchCallback, ZkWatch, children_watcher
from kpo_kafka.topic_partition import TopicPartition

log = logging.getLogger(__name__)

#: Elections retried after losing the epoch compare-and-set while nobody holds ``/controller``.
_ELECTION_ATTEMPTS = 3
#: Topic assignments per multiRead: one of a topic with thousands of partitions holds tens
#: of KiB, and the answer holds them all.
_ASSIGNMENTS_PER_READ = 10
#: Config writes retried while the config znode keeps appearing and vanishing.
_CONFIG_WRITE_ATTEMPTS = 3
#: Producer id block claims retried after losing the compare-and-set (each lost attempt
#: means another broker claimed a block meanwhile, so this only trips under
#: pathological contention).
_PRODUCER_ID_CLAIM_ATTEMPTS = 100


def _now_ms() -> int:
    """Return the wall-clock time in ms since the epoch (the ``timestamp`` fields)."""
    return time.time_ns() // 1_000_000


def _refused(path: str, result: object) -> ZkOperationError:
    """Return the error for a request on ``path`` that failed with ``result``."""
    return ZkOperationError(path, type(result).__name__)


@dataclass(frozen=True)
class IsrUpdate:
    """A leader's ISR change of one partition, for :meth:`KafkaZkClient.update_isrs`.

    Attributes:
        tp: the partition.
        leader_and_isr: the new state (same leader and leader epoch, new ISR).
        controller_epoch: the controller epoch of the last LeaderAndIsr received.
        expected_partition_epoch: the state znode version the leader knows.
    """

    tp: TopicPartition
    leader_and_isr: LeaderAndIsr
    controller_epoch: int
    expected_partition_epoch: int


class KafkaZkClient:
    """Kafka's ZooKeeper client, over one kazoo session.

    Args:
        connect: ``zookeeper.connect``, e.g. ``"127.0.0.1:2181/kafka"`` (the chroot is
            created on :meth:`connect` when missing).
        session_timeout_ms: ``zookeeper.session.timeout.ms`` (default 18000).
        connection_timeout_ms: ``zookeeper.connection.timeout.ms`` (default: the session
            timeout).
        max_in_flight_requests: ``zookeeper.max.in.flight.requests`` (default 10): the
            most requests awaiting their answer at once (Kafka's ``ZooKeeperClient``).
        security: SASL credentials and znode ACLs (``zookeeper.set.acl``, see
            :mod:`kpo_broker.zk.security`); default unauthenticated with open znodes.

    Use :meth:`connect` and :meth:`close`, or a ``with`` block. Errors are the named
    classes of :mod:`kpo_broker.zk.errors`.

    Raises:
        ValueError: ``max_in_flight_requests`` is below 1.
    """

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        connection_timeout_ms: int | None = None,
        max_in_flight_requests: int = DEFAULT_MAX_IN_FLIGHT_REQUESTS,
        security: ZkClientSecurity | None = None,
    ) -> None:
        self._session = ZkSession(
            connect,
            session_timeout_ms=session_timeout_ms,
            connection_timeout_ms=connection_timeout_ms,
            max_in_flight_requests=max_in_flight_requests,
            security=security,
        )

    # --- session --------------------------------------------------------------------------

    def connect(self) -> None:
        """Create the chroot if missing, open the session and create Kafka's persistent paths.

        Raises:
            ZkConnectionLossError: no server answered within ``zookeeper.connection.timeout.ms``.
        """
        self._session.connect()

    def close(self) -> None:
        """Close the session (its ephemeral znodes vanish); idempotent."""
        self._session.close()

    def __enter__(self) -> KafkaZkClient:
        self.connect()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        """Whether the session is connected now."""
        return self._session.connected

    @property
    def stats(self) -> ZkRequestStats:
        """A snapshot of the session's request counters."""
        return self._session.stats

    def add_session_listener(self, callback: Callable[[ZkSessionState], None]) -> None:
        """Call ``callback(state)`` on each session state change, from kazoo's thread.

        The callback must not block or call ZooKeeper (enqueue the state and return):
        on NEW_SESSION (a new session after an expiry) the broker registers itself again
        and the controller re-elects (Kafka's session expiry handlers).
        """
        self._session.add_session_listener(callback)

    # --- brokers: /brokers/ids, /brokers/seqid, /cluster/id -------------------------------

    def register_broker(self, registration: BrokerRegistration) -> int:
        """Create the ephemeral ``/brokers/ids/<id>`` znode of this broker.

        Returns:
            the broker epoch: the znode's czxid (KIP-380), as Kafka does.

        Raises:
            BrokerIdAlreadyRegisteredError: another session holds this broker id.
            ZkConnectionLossError: the session failed.
        """
        path = paths.broker_path(registration.id)
        data = encode_broker_registration(registration, _now_ms())
        result = self._session.handle_request(
            "create_async", path, data, ephemeral=True, include_data=True
        )
        if isinstance(result, NodeExistsError):
            # Our own znode (a retried create within the same session) is a success.
            stat: Any = self._session.handle_request("exists_async", path)
            if (
                stat is not None
                and not isinstance(stat, ZookeeperError)
                and stat.ephemeralOwner == self._session.session_id
            ):
                return int(stat.czxid)
            raise BrokerIdAlreadyRegisteredError(
                f"broker.id {registration.id} is already registered at {path}"
            )
        if isinstance(result, ZookeeperError):
            raise _refused(path, result)
        _, created = result
        return int(created.czxid)

    def get_live_broker_ids(self) -> list[int]:
        """Return the ids of the registered (live) brokers, sorted.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        result = self._session.handle_request("get_children_async", paths.BROKER_IDS)
        if isinstance(result, NoNodeError):
            return []
        if isinstance(result, ZookeeperError) or not isinstance(result, list):
            raise _refused(paths.BROKER_IDS, result)
        return sorted(int(child) for child in result if child.isdigit())

    def get_live_brokers(self) -> dict[int, BrokerRegistration]:
        """Return broker id -> registration (with its epoch) of every live broker.

        The registrations are read pipelined; brokers that vanish meanwhile are left out.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: a registration is not Kafka's format.
        """
        ids = self.get_live_broker_ids()
        results = self._session.get_many([paths.broker_path(i) for i in ids])
        brokers: dict[int, BrokerRegistration] = {}
        for broker_id, result in zip(ids, results, strict=True):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, ZookeeperError):
                raise _refused(paths.broker_path(broker_id), result)
            data, stat = result
            brokers[broker_id] = decode_broker_registration(broker_id, data, stat.czxid)
        return brokers

    def get_broker(self, broker_id: int) -> BrokerRegistration | None:
        """Return one live broker's registration, or None when it is not registered.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: the registration is not Kafka's format.
        """
        path = paths.broker_path(broker_id)
        result = self._session.handle_request("get_async", path)
        if isinstance(result, NoNodeError):
            return None
        if isinstance(result, ZookeeperError):
            raise _refused(path, result)
        data, stat = result
        return decode_broker_registration(broker_id, data, stat.czxid)

    def generate_broker_sequence_id(self) -> int:
        """Return a new cluster-unique sequence number: the new version of ``/brokers/seqid``.

        Kafka adds ``reserved.broker.max.id`` to it to generate a ``broker.id``
        (``broker.id.generation.enable``).

        Raises:
            ZkConnectionLossError: the session failed.
        """
        path = paths.BROKER_SEQUENCE_ID
        result = self._session.handle_request("set_async", path, b"", -1)
        if isinstance(result, NoNodeError):
            self._session.ensure_paths([path])
            result = self._session.handle_request("set_async", path, b"", -1)
        if isinstance(result, ZookeeperError):
            raise _refused(path, result)
        return int(result.version)

    def get_cluster_id(self) -> str | None:
        """Return the cluster id from ``/cluster/id``, or None when none was created yet.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: the znode is not Kafka's format.
        """
        result = self._session.handle_request("get_async", paths.CLUSTER_ID)
        if isinstance(result, NoNodeError):
            return None
        if isinstance(result, ZookeeperError):
            raise _refused(paths.CLUSTER_ID, result)
        data, _ = result
        return decode_cluster_id(data)

    def get_or_create_cluster_id(self, proposed_id: str) -> str:
        """Return the cluster id, creating ``/cluster/id`` with ``proposed_id`` if it is missing.

        Only the first broker's proposal is kept (Kafka's ``getOrGenerateClusterId``);
        Kafka proposes a URL-safe base64 UUID.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        existing = self.get_cluster_id()
        if existing is not None:
            return existing
        path, data = paths.CLUSTER_ID, encode_cluster_id(proposed_id)
        result = self._session.handle_request("create_async", path, data, makepath=True)
        if isinstance(result, NodeExistsError):
            created = self.get_cluster_id()
            if created is not None:
                return created
        if isinstance(result, ZookeeperError):
            raise _refused(path, result)
        return proposed_id

    # --- controller: /controller and /controller_epoch ------------------------------------

    def get_controller_id(self) -> int | None:
        """Return the broker id of the active controller, or None when there is none.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: ``/controller`` is not Kafka's format.
        """
        result = self._session.handle_request("get_async", paths.CONTROLLER)
        if isinstance(result, NoNodeError):
            return None
        if isinstance(result, ZookeeperError):
            raise _refused(paths.CONTROLLER, result)
        return decode_controller(result[0])

    def get_controller_epoch(self) -> ControllerEpoch | None:
        """Return the controller epoch and its znode version, or None before the first election.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: ``/controller_epoch`` is not a number.
        """
        path = paths.CONTROLLER_EPOCH
        result = self._session.handle_request("get_async", path)
        if isinstance(result, NoNodeError):
            return None
        if isinstance(result, ZookeeperError):
            raise _refused(path, result)
        data, stat = result
        return ControllerEpoch(decode_controller_epoch(data), stat.version)

    def _current_controller_epoch(self) -> ControllerEpoch:
        current = self.get_controller_epoch()
        if current is not None:
            return current
        path, data = paths.CONTROLLER_EPOCH, encode_controller_epoch(INITIAL_CONTROLLER_EPOCH)
        result = self._session.handle_request("create_async", path, data)
        if isinstance(result, ZookeeperError) and not isinstance(result, NodeExistsError):
            raise _refused(path, result)
        current = self.get_controller_epoch()
        if current is None:
            raise ZkOperationError(path, "vanished after creation")
        return current

    def _owns_controller(self, broker_id: int) -> bool:
        path = paths.CONTROLLER
        result = self._session.handle_request("get_async", path)
        if isinstance(result, ZookeeperError):
            return False
        data, stat = result
        return bool(
            decode_controller(data) == broker_id and stat.ephemeralOwner == self._session.session_id
        )

    def try_elect_controller(self, broker_id: int) -> ControllerEpoch | None:
        """Try to become the controller: create ``/controller`` and bump the controller epoch.

        ``/controller_epoch`` is created at 0 when missing, so the first controller has
        epoch 1. When the epoch compare-and-set loses to a broker that has since gone
        (nobody holds ``/controller``), the election is retried with the new epoch.

        Returns:
            the new epoch and its znode version (the fence of this controller's writes),
            or None when another broker is (or just became) the controller.

        Raises:
            ZkConnectionLossError: the session failed; the outcome is unknown until
                :meth:`get_controller_id` is read again.
        """
        for _ in range(_ELECTION_ATTEMPTS):
            current = self._current_controller_epoch()
            new_epoch = current.epoch + 1
            results = self._session.multi(
                [
                    CreateOp(
                        paths.CONTROLLER, encode_controller(broker_id, _now_ms()), ephemeral=True
                    ),
                    SetDataOp(
                        paths.CONTROLLER_EPOCH,
                        encode_controller_epoch(new_epoch),
                        current.zk_version,
                    ),
                ]
            )
            error = multi_error(results)
            if error is None:
                return ControllerEpoch(new_epoch, results[1].version)
            if self._owns_controller(broker_id):
                # A retried election of ours already won (after a lost response).
                return self._current_controller_epoch()
            if isinstance(error, NodeExistsError) or self.get_controller_id() is not None:
                return None
        return None

    def resign_controller(self, controller_epoch_zk_version: int) -> bool:
        """Delete ``/controller`` if this controller's epoch is still current.

        Returns:
            True when deleted; False when the epoch moved on or nobody was controller.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        try:
            results = self._session.multi([DeleteOp(paths.CONTROLLER)], controller_epoch_zk_version)
        except ControllerMovedError:
            return False
        return multi_error(results) is None

    # --- topics: /brokers/topics and /admin/delete_topics ---------------------------------

    def create_topic(
        self,
        topic: str,
        assignment: Mapping[int, Sequence[int]],
        config: Mapping[str, str],
    ) -> None:
        """Create a topic: its config znode first, then ``/brokers/topics/<topic>``.

        The controller sees the new topic through its ``/brokers/topics`` watch and
        creates the partition states (Kafka's ``TopicChangeHandler`` and
        ``onNewPartitionCreation``). The config is written first so the
        controller and the brokers never see the topic without it (Kafka's
        ``createTopicWithAssignment``).

        Args:
            topic: topic name (validated as a path segment only).
            assignment: partition index -> replicas (AR, preferred leader first).
            config: topic config overrides, e.g. ``{"cleanup.policy": "compact"}``.

        Raises:
            TopicAlreadyExistsError: the topic exists, or is still queued for deletion.
            ZkConnectionLossError: the session failed.
        """
        path = paths.topic_path(topic)
        exists, marked = self._session.handle_requests(
            [
                self._session.request("exists_async", path),
                self._session.request("exists_async", paths.delete_topic_path(topic)),
            ]
        )
        if exists is not None:
            raise TopicAlreadyExistsError(f"topic {topic!r} already exists")
        if marked is not None:
            raise TopicAlreadyExistsError(f"topic {topic!r} is marked for deletion")
        self._session.set_or_create(
            paths.config_entity_path(paths.CONFIG_TYPE_TOPICS, topic), encode_entity_config(config)
        )
        data = encode_topic_assignment(
            {p: ReplicaAssignment(tuple(replicas)) for p, replicas in assignment.items()},
            new_topic_id(),
        )
        result = self._session.handle_request("create_async", path, data, makepath=True)
        if isinstance(result, NodeExistsError):
            raise TopicAlreadyExistsError(f"topic {topic!r} already exists")
        if isinstance(result, ZookeeperError):
            raise _refused(path, result)

    def _children(self, path: str) -> set[str]:
        """Return the children of ``path``; an absent znode has none."""
        result = self._session.handle_request("get_children_async", path)
        if isinstance(result, NoNodeError):
            return set()
        if isinstance(result, ZookeeperError):
            raise _refused(path, result)
        return set(result)

    def get_all_topics(self) -> set[str]:
        """Return the names of all topics (children of ``/brokers/topics``).

        Raises:
            ZkConnectionLossError: the session failed.
        """
        return self._children(paths.BROKER_TOPICS)

    def get_replica_assignments(self, topics: Iterable[str]) -> dict[str, TopicAssignment]:
        """Read the replica assignments of many topics, pipelined.

        Returns:
            topic -> its assignment; topics that do not exist are left out.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: an assignment is not Kafka's format.
        """
        names = sorted(set(topics))
        results = self._session.get_many(
            [paths.topic_path(t) for t in names], _ASSIGNMENTS_PER_READ
        )
        assignments: dict[str, TopicAssignment] = {}
        for topic, result in zip(names, results, strict=True):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, ZookeeperError):
                raise _refused(paths.topic_path(topic), result)
            data, stat = result
            assignments[topic] = TopicAssignment(
                topic, decode_topic_assignment(data), stat.version, decode_topic_id(data)
            )
        return assignments

    def set_replica_assignment(
        self,
        topic: str,
        assignment: Mapping[int, ReplicaAssignment],
        expected_version: int,
        *,
        topic_id: str | None,
        controller_epoch_zk_version: int | None = None,
    ) -> int | None:
        """Write a topic's assignment with a compare-and-set on its znode version.

        Args:
            topic: the topic.
            assignment: the full assignment, every partition included.
            expected_version: :attr:`TopicAssignment.zk_version` of the assignment read.
            topic_id: the topic id to keep (:attr:`TopicAssignment.topic_id` of the
                assignment read, or a new one for a topic without), KIP-516.
            controller_epoch_zk_version: the controller's fence; None for admin writes
                (e.g. adding partitions) made outside the controller.

        Returns:
            the new znode version, or None on a version conflict or a deleted topic.

        Raises:
            ControllerMovedError: the fence failed.
            ZkConnectionLossError: the session failed.
        """
        path, data = paths.topic_path(topic), encode_topic_assignment(assignment, topic_id)
        if controller_epoch_zk_version is None:
            return self._session.set_or_create(path, data, expected_version)
        results = self._session.multi(
            [SetDataOp(path, data, expected_version)], controller_epoch_zk_version
        )
        error = multi_error(results)
        if error is None:
            return int(results[0].version)
        if isinstance(error, BadVersionError | NoNodeError):
            return None
        raise _refused(path, error)

    # --- deletion -------------------------------------------------------------------------

    def mark_topics_for_deletion(self, topics: Iterable[str]) -> None:
        """Queue topics for deletion by creating ``/admin/delete_topics/<topic>`` (admin side).

        Topics already queued are left as they are.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        requests = [
            self._session.request("create_async", p, b"", makepath=True)
            for p in map(paths.delete_topic_path, sorted(set(topics)))
        ]
        for (path, _), result in zip(
            requests, self._session.handle_requests(requests), strict=True
        ):
            if isinstance(result, ZookeeperError) and not isinstance(result, NodeExistsError):
                raise _refused(path, result)

    def get_topics_marked_for_deletion(self) -> set[str]:
        """Return the topics queued in ``/admin/delete_topics``.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        return self._children(paths.ADMIN_DELETE_TOPICS)

    def remove_topic_deletion_markers(
        self, topics: Iterable[str], *, controller_epoch_zk_version: int
    ) -> None:
        """Delete ``/admin/delete_topics/<topic>`` once topics are deleted (controller side).

        Raises:
            ControllerMovedError: the fence failed.
            ZkConnectionLossError: the session failed.
        """
        markers = [paths.delete_topic_path(t) for t in sorted(set(topics))]
        requests = [
            (p, self._session.multi_request([DeleteOp(p)], controller_epoch_zk_version))
            for p in markers
        ]
        for path, result in zip(markers, self._session.handle_requests(requests), strict=True):
            error = multi_error(multi_results(result, True, path))
            if error is not None and not isinstance(error, NoNodeError):
                raise _refused(path, error)

    def delete_topic_znodes(
        self, topics: Iterable[str], *, controller_epoch_zk_version: int
    ) -> None:
        """Delete topics' assignment and partition state znodes and their configs (controller side).

        Removes ``/brokers/topics/<topic>`` recursively and ``/config/topics/<topic>``;
        missing znodes are skipped.

        Raises:
            ControllerMovedError: the fence failed.
            ZkConnectionLossError: the session failed.
        """
        names = sorted(set(topics))
        roots = [paths.topic_path(t) for t in names] + [
            paths.config_entity_path(paths.CONFIG_TYPE_TOPICS, t) for t in names
        ]
        self._session.delete_recursive(roots, controller_epoch_zk_version)

    # --- partition states: /brokers/topics/<t>/partitions/<p>/state -----------------------

    def create_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        *,
        controller_epoch_zk_version: int,
    ) -> PartitionStateWriteResult:
        """Create the state znodes of new partitions (NewPartition -> OnlinePartition).

        Creates ``/brokers/topics/<t>/partitions`` per topic, then per partition the
        fenced operations creating ``partitions/<p>`` and ``partitions/<p>/state``, many
        partitions to a multi (:meth:`ZkSession.handle_multis`), pipelined.

        Raises:
            ControllerMovedError: the controller epoch znode version is not
                ``controller_epoch_zk_version``.
            ZkConnectionLossError: the session failed.
        """
        fence = controller_epoch_zk_version
        result = PartitionStateWriteResult()
        topics = sorted({tp.topic for tp in states})
        parents = [paths.topic_partitions_path(t) for t in topics]
        created = self._session.handle_requests(
            [(p, self._session.multi_request([CreateOp(p)], fence)) for p in parents]
        )
        missing_topics: set[str] = set()
        for topic, path, outcome in zip(topics, parents, created, strict=True):
            error = multi_error(multi_results(outcome, True, path))
            if isinstance(error, NoNodeError):
                missing_topics.add(topic)
            elif error is not None and not isinstance(error, NodeExistsError):
                raise _refused(path, error)
        result.missing = {tp for tp in states if tp.topic in missing_topics}
        pending = sorted(tp for tp in states if tp.topic not in missing_topics)

        for with_parent in (True, False):
            groups = [create_partition_state_ops(tp, states[tp], with_parent) for tp in pending]
            retry: list[TopicPartition] = []
            for tp, results in zip(
                pending, self._session.handle_multis(groups, fence), strict=True
            ):
                error = multi_error(results)
                if error is None:
                    lai = states[tp].leader_and_isr
                    result.written[tp] = lai.with_partition_epoch(INITIAL_PARTITION_EPOCH)
                elif with_parent and isinstance(results[0], NodeExistsError):
                    retry.append(tp)  # partitions/<p> exists: create the state alone
                elif isinstance(error, NodeExistsError):
                    result.version_conflicts.add(tp)
                elif isinstance(error, NoNodeError):
                    result.missing.add(tp)
                else:
                    raise _refused(state_path(tp), error)
            pending = retry
        return result

    def update_leader_and_isr(
        self,
        leader_and_isrs: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        *,
        controller_epoch_zk_version: int,
    ) -> PartitionStateWriteResult:
        """Write new LeaderAndIsr states of many partitions (controller side), batched.

        Many partitions go in one fenced multi (:meth:`ZkSession.handle_multis`); a multi
        that a conflicting partition aborts is sent again one partition at a time.

        Each value's ``partition_epoch`` is the state znode version the write expects
        (Kafka's ``LeaderAndIsr.zkVersion``): each partition is a compare-and-set.

        Args:
            leader_and_isrs: partition -> its new leader, leader epoch and ISR.
            controller_epoch: this controller's epoch, stored in each state znode.
            controller_epoch_zk_version: the controller's fence.

        Raises:
            ControllerMovedError: the fence failed.
            ZkConnectionLossError: the session failed.
        """
        result = PartitionStateWriteResult()
        partitions = sorted(leader_and_isrs)
        groups = [
            [update_partition_state_op(tp, leader_and_isrs[tp], controller_epoch)]
            for tp in partitions
        ]
        outcomes = self._session.handle_multis(groups, controller_epoch_zk_version)
        for tp, results in zip(partitions, outcomes, strict=True):
            error = multi_error(results)
            if error is None:
                result.written[tp] = leader_and_isrs[tp].with_partition_epoch(results[0].version)
            elif isinstance(error, BadVersionError):
                result.version_conflicts.add(tp)
            elif isinstance(error, NoNodeError):
                result.missing.add(tp)
            else:
                raise _refused(state_path(tp), error)
        return result

    def get_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Read many partition states, pipelined; partitions without a state are left out.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: a state znode is not Kafka's format.
        """
        ordered = sorted(set(partitions))
        outcomes = self._session.get_many([state_path(tp) for tp in ordered])
        states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp, outcome in zip(ordered, outcomes, strict=True):
            if isinstance(outcome, NoNodeError):
                continue
            if isinstance(outcome, ZookeeperError):
                raise _refused(state_path(tp), outcome)
            data, stat = outcome
            states[tp] = decode_partition_state(data, stat.version)
        return states

    def update_isr(
        self,
        tp: TopicPartition,
        leader_and_isr: LeaderAndIsr,
        controller_epoch: int,
        expected_partition_epoch: int,
    ) -> int | None:
        """Write a partition's new ISR as its leader (broker side), compare-and-set.

        The leader shrinks or expands the ISR (Kafka's ``Partition.maybeShrinkIsr`` and
        ``maybeExpandIsr``); the write fails when the controller changed the state
        meanwhile, so a deposed leader cannot change the ISR after a new leader was
        elected (the partition epoch fences it, as in Kafka's replication design). A
        conflict whose current content is exactly the intended state counts as a
        success (the response to our own write was lost).

        Args:
            tp: the partition.
            leader_and_isr: the new state (same leader and leader epoch, new ISR).
            controller_epoch: the controller epoch of the last LeaderAndIsr received.
            expected_partition_epoch: the state znode version the leader knows.

        Returns:
            the new partition epoch, or None on a version conflict (the caller drops
            the update and waits for the controller's LeaderAndIsr).

        Raises:
            ZkConnectionLossError: the session failed.
        """
        return self.update_isrs(
            [IsrUpdate(tp, leader_and_isr, controller_epoch, expected_partition_epoch)]
        )[0]

    def update_isrs(self, updates: Sequence[IsrUpdate]) -> list[int | None]:
        """Apply many :meth:`update_isr` compare-and-sets at once (a leader's batch).

        The compare-and-sets share multis (:meth:`ZkSession.handle_multis`: one that a
        conflict aborts is sent again one partition per multi, so each partition
        succeeds or conflicts on its own). The conflicting ones are then read, to tell
        a lost response to our own write from a real conflict.

        Returns:
            per update, in order: the new partition epoch, or None on a conflict.

        Raises:
            ZkConnectionLossError: the session failed.
            ZkOperationError: ZooKeeper refused a write for another reason.
        """
        groups = [
            [
                SetDataOp(
                    state_path(update.tp),
                    encode_partition_state(
                        LeaderIsrAndControllerEpoch(update.leader_and_isr, update.controller_epoch)
                    ),
                    update.expected_partition_epoch,
                )
            ]
            for update in updates
        ]
        versions: list[int | None] = []
        conflicts: list[int] = []
        for i, (update, results) in enumerate(
            zip(updates, self._session.handle_multis(groups), strict=True)
        ):
            versions.append(None)
            error = multi_error(results)
            if isinstance(error, BadVersionError):
                conflicts.append(i)
            elif error is not None and not isinstance(error, NoNodeError):
                raise _refused(state_path(update.tp), error)
            elif error is None:
                versions[i] = int(results[0].version)
        if conflicts:
            current = self.get_partition_states(updates[i].tp for i in conflicts)
            for i in conflicts:
                update = updates[i]
                state = current.get(update.tp)
                if state is None:
                    continue
                same = LeaderIsrAndControllerEpoch(
                    update.leader_and_isr.with_partition_epoch(
                        state.leader_and_isr.partition_epoch
                    ),
                    update.controller_epoch,
                )
                if state == same:
                    versions[i] = state.leader_and_isr.partition_epoch
        return versions

    # --- admin: ISR change notifications, reassignment, preferred election ----------------

    # --- /isr_change_notification ---------------------------------------------------------

    def propagate_isr_change(self, partitions: Iterable[TopicPartition]) -> str:
        """Announce ISR changes to the controller (broker side).

        Returns:
            the created child name, e.g. ``"isr_change_0000000004"``.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        return self.create_sequential(
            paths.ISR_CHANGE_NOTIFICATION,
            paths.ISR_CHANGE_PREFIX,
            encode_isr_change_notification(partitions),
        )

    def get_isr_change_notifications(self) -> list[str]:
        """Return the pending ISR change notification names, oldest first.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        return self._sequential_children(paths.ISR_CHANGE_NOTIFICATION, paths.ISR_CHANGE_PREFIX)

    def _sequential_children(self, parent: str, prefix: str) -> list[str]:
        result = self._session.handle_request("get_children_async", parent)
        if isinstance(result, NoNodeError):
            return []
        if isinstance(result, ZookeeperError):
            raise _refused(parent, result)
        names = [name for name in result if name.startswith(prefix)]
        return sorted(names, key=lambda name: paths.sequence_number(name, prefix))

    def get_isr_change_notification_partitions(self, names: Iterable[str]) -> set[TopicPartition]:
        """Read ISR change notifications, pipelined, and return the partitions they name.

        Notifications deleted meanwhile are skipped.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: a notification is not Kafka's format.
        """
        znodes = [paths.isr_change_notification_path(n) for n in names]
        partitions: set[TopicPartition] = set()
        for path, result in zip(
            znodes,
            self._session.get_many(znodes),
            strict=True,
        ):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, ZookeeperError):
                raise _refused(path, result)
            partitions |= decode_isr_change_notification(result[0])
        return partitions

    def delete_isr_change_notifications(
        self, names: Iterable[str], *, controller_epoch_zk_version: int
    ) -> None:
        """Delete processed ISR change notifications (controller side), pipelined.

        Raises:
            ControllerMovedError: the fence failed.
            ZkConnectionLossError: the session failed.
        """
        znodes = [paths.isr_change_notification_path(n) for n in names]
        self._session.delete_recursive(znodes, controller_epoch_zk_version)

    # --- /log_dir_event_notification ------------------------------------------------------

    def propagate_log_dir_event(self, broker_id: int) -> str:
        """Tell the controller that a log dir of ``broker_id`` failed (broker side).

        Kafka's ``KafkaZkClient.propagateLogDirEvent``: a persistent sequential child
        ``/log_dir_event_notification/log_dir_event_<seq>`` holding
        ``{"version":1,"broker":<id>,"event":1}``.

        Returns:
            the created child name, e.g. ``"log_dir_event_0000000002"``.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        return self.create_sequential(
            paths.LOG_DIR_EVENT_NOTIFICATION,
            paths.LOG_DIR_EVENT_PREFIX,
            encode_log_dir_event_notification(broker_id),
        )

    def get_log_dir_event_notifications(self) -> list[str]:
        """Return the pending log dir event notification names, oldest first.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        return self._sequential_children(
            paths.LOG_DIR_EVENT_NOTIFICATION, paths.LOG_DIR_EVENT_PREFIX
        )

    def get_broker_ids_from_log_dir_events(self, names: Iterable[str]) -> list[int]:
        """Read log dir event notifications, pipelined; return their broker ids in order.

        Notifications deleted meanwhile are skipped; a broker appears once per notification.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: a notification is not Kafka's format.
        """
        znodes = [paths.log_dir_event_notification_path(n) for n in names]
        broker_ids: list[int] = []
        for path, result in zip(
            znodes,
            self._session.get_many(znodes),
            strict=True,
        ):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, ZookeeperError):
                raise _refused(path, result)
            broker_ids.append(decode_log_dir_event_notification(result[0]))
        return broker_ids

    def delete_log_dir_event_notifications(
        self, names: Iterable[str], *, controller_epoch_zk_version: int
    ) -> None:
        """Delete processed log dir event notifications (controller side), pipelined, fenced.

        Raises:
            ControllerMovedError: the fence failed.
            ZkConnectionLossError: the session failed.
        """
        znodes = [paths.log_dir_event_notification_path(n) for n in names]
        self._session.delete_recursive(znodes, controller_epoch_zk_version)

    # --- /admin/reassign_partitions -------------------------------------------------------

    def create_partition_reassignment(
        self, reassignment: Mapping[TopicPartition, Sequence[int]]
    ) -> None:
        """Queue a reassignment: partition -> target replicas (RAR) (``kafka-reassign-partitions``).

        Raises:
            ReassignmentInProgressError: a reassignment is already queued.
            ZkConnectionLossError: the session failed.
        """
        path, data = paths.ADMIN_REASSIGN_PARTITIONS, encode_partition_reassignment(reassignment)
        result = self._session.handle_request("create_async", path, data, makepath=True)
        if isinstance(result, NodeExistsError):
            raise ReassignmentInProgressError(f"{path} exists: a reassignment is in progress")
        if isinstance(result, ZookeeperError):
            raise _refused(path, result)

    def get_partition_reassignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        """Return the queued reassignment (partition -> RAR); empty when none is queued.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: the znode is not Kafka's format.
        """
        path = paths.ADMIN_REASSIGN_PARTITIONS
        result = self._session.handle_request("get_async", path)
        if isinstance(result, NoNodeError):
            return {}
        if isinstance(result, ZookeeperError):
            raise _refused(path, result)
        return decode_partition_reassignment(result[0])

    def set_partition_reassignment(
        self,
        reassignment: Mapping[TopicPartition, Sequence[int]],
        *,
        controller_epoch_zk_version: int,
    ) -> None:
        """Rewrite the queued reassignment, e.g. without the completed partitions (controller side).

        Creates the znode when missing (Kafka's ``setOrCreatePartitionReassignment``).

        Raises:
            ControllerMovedError: the fence failed.
            ZkConnectionLossError: the session failed.
        """
        path, data = paths.ADMIN_REASSIGN_PARTITIONS, encode_partition_reassignment(reassignment)
        fence = controller_epoch_zk_version
        error = multi_error(self._session.multi([SetDataOp(path, data)], fence))
        if isinstance(error, NoNodeError):
            error = multi_error(self._session.multi([CreateOp(path, data)], fence))
        if error is not None:
            raise _refused(path, error)

    def delete_partition_reassignment(self, *, controller_epoch_zk_version: int) -> None:
        """Delete ``/admin/reassign_partitions`` once all partitions completed (controller side).

        Raises:
            ControllerMovedError: the fence failed.
            ZkConnectionLossError: the session failed.
        """
        self._session.delete_recursive(
            [paths.ADMIN_REASSIGN_PARTITIONS], controller_epoch_zk_version
        )

    # --- /admin/preferred_replica_election ------------------------------------------------

    def create_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> None:
        """Queue a preferred replica election for ``partitions`` (admin side).

        Raises:
            PreferredReplicaElectionInProgressError: an election is already queued.
            ZkConnectionLossError: the session failed.
        """
        path = paths.ADMIN_PREFERRED_REPLICA_ELECTION
        data = encode_preferred_replica_election(partitions)
        result = self._session.handle_request("create_async", path, data, makepath=True)
        if isinstance(result, NodeExistsError):
            raise PreferredReplicaElectionInProgressError(f"{path} exists: election in progress")
        if isinstance(result, ZookeeperError):
            raise _refused(path, result)

    def get_preferred_replica_election(self) -> set[TopicPartition]:
        """Return the partitions of the queued preferred replica election (empty if none).

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: the znode is not Kafka's format.
        """
        path = paths.ADMIN_PREFERRED_REPLICA_ELECTION
        result = self._session.handle_request("get_async", path)
        if isinstance(result, NoNodeError):
            return set()
        if isinstance(result, ZookeeperError):
            raise _refused(path, result)
        return decode_preferred_replica_election(result[0])

    def delete_preferred_replica_election(self, *, controller_epoch_zk_version: int) -> None:
        """Delete ``/admin/preferred_replica_election`` once elected (controller side).

        Raises:
            ControllerMovedError: the fence failed.
            ZkConnectionLossError: the session failed.
        """
        path = paths.ADMIN_PREFERRED_REPLICA_ELECTION
        self._session.delete_recursive([path], controller_epoch_zk_version)

    # --- configs: /config/<entity type>/<name> and /config/changes ------------------------

    def get_entity_configs(self, entity_type: str, names: Iterable[str]) -> dict[str, EntityConfig]:
        """Read the configs of many entities of one type, pipelined.

        Args:
            entity_type: ``"topics"``, ``"brokers"``, ``"clients"`` or ``"users"``.
            names: entity names, e.g. topics, broker ids or ``"<default>"``.

        Returns:
            name -> config; entities without a config znode map to an empty config.

        Raises:
            InvalidZNodeNameError: unknown entity type or unusable name.
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: a config znode is not Kafka's format.
        """
        ordered = sorted(set(names))
        znodes = [paths.config_entity_path(entity_type, n) for n in ordered]
        configs: dict[str, EntityConfig] = {}
        for name, path, result in zip(ordered, znodes, self._session.get_many(znodes), strict=True):
            if isinstance(result, NoNodeError):
                configs[name] = EntityConfig({}, None)
            elif isinstance(result, ZookeeperError):
                raise _refused(path, result)
            else:
                configs[name] = EntityConfig(decode_entity_config(result[0]), result[1].version)
        return configs

    def get_entity_names(self, entity_type: str) -> set[str]:
        """Return the entities of one type that have a config znode (``/config/<type>``'s children).

        Kafka's ``AdminZkClient.fetchAllEntityConfigs`` lists them the same way; names are
        as stored (users sanitized).

        Raises:
            InvalidZNodeNameError: unknown entity type.
            ZkConnectionLossError: the session failed.
        """
        return self._children(paths.config_entity_type_path(entity_type))

    def get_entity_config(self, entity_type: str, name: str) -> EntityConfig:
        """Read one entity's config (see :meth:`get_entity_configs`).

        Raises:
            InvalidZNodeNameError: unknown entity type or unusable name.
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: the config znode is not Kafka's format.
        """
        return self.get_entity_configs(entity_type, [name])[name]

    def set_entity_config(
        self,
        entity_type: str,
        name: str,
        config: Mapping[str, str],
        expected_version: int | None = None,
    ) -> int | None:
        """Replace an entity's config and announce it with a ``/config/changes`` notification.

        Args:
            entity_type: ``"topics"``, ``"brokers"``, ``"clients"`` or ``"users"``.
            name: the entity, e.g. a topic, a broker id or ``"<default>"``.
            config: the complete new config (names -> string values).
            expected_version: :attr:`EntityConfig.zk_version` of the config read, for a
                compare-and-set (a read-modify-write such as IncrementalAlterConfigs);
                None overwrites, creating the znode when missing.

        Returns:
            the config znode's new version, or None on a version conflict.

        Raises:
            InvalidZNodeNameError: unknown entity type or unusable name.
            ZkConnectionLossError: the session failed.
        """
        path = paths.config_entity_path(entity_type, name)
        data = encode_entity_config(config)
        notification = config_change_notification_op(entity_type, name)
        version = -1 if expected_version is None else expected_version
        for _ in range(_CONFIG_WRITE_ATTEMPTS):
            set_first: list[Op] = [SetDataOp(path, data, version), notification]
            results = self._session.multi(set_first)
            error = multi_error(results)
            if error is None:
                return int(results[0].version)
            if expected_version is not None and isinstance(
                results[0], BadVersionError | NoNodeError
            ):
                return None
            if not isinstance(results[0], NoNodeError):
                raise _refused(path, error)
            results = self._session.multi([CreateOp(path, data), notification])
            error = multi_error(results)
            if error is None:
                return 0
            if not isinstance(results[0], NodeExistsError):
                raise _refused(path, error)
        raise ZkOperationError(path, "config znode kept appearing and vanishing")

    def get_config_changes(self, since_seq: int = -1) -> list[tuple[int, ConfigChange]]:
        """Return the config change notifications with a sequence number above ``since_seq``.

        Args:
            since_seq: the last sequence number processed; -1 returns all.

        Returns:
            ``(sequence number, change)`` pairs, oldest first; notifications purged
            meanwhile are skipped, and so are those not in Kafka's format (with a
            warning), so that one bad znode does not block every later change.

        Raises:
            ZkConnectionLossError: the session failed.
            ZkOperationError: ZooKeeper refused a read.
        """
        parent, prefix = paths.CONFIG_CHANGES, paths.CONFIG_CHANGE_PREFIX
        listed = self._session.handle_request("get_children_async", parent)
        if isinstance(listed, NoNodeError):
            return []
        if isinstance(listed, ZookeeperError):
            raise _refused(parent, listed)
        seqs = sorted(
            (seq, name)
            for name in listed
            if name.startswith(prefix) and (seq := paths.sequence_number(name, prefix)) > since_seq
        )
        znodes = [paths.config_change_path(name) for _, name in seqs]
        changes: list[tuple[int, ConfigChange]] = []
        for (seq, _), path, result in zip(
            seqs, znodes, self._session.get_many(znodes), strict=True
        ):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, ZookeeperError):
                raise _refused(path, result)
            try:
                changes.append((seq, decode_config_change_notification(result[0])))
            except MalformedZNodeDataError as exc:
                log.warning("ignoring config change notification %s: %s", path, exc)
        return changes

    def delete_config_changes(self, up_to_seq: int) -> None:
        """Purge the config change notifications with a sequence number up to ``up_to_seq``.

        Kafka purges notifications older than 15 minutes; the caller picks ``up_to_seq``.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        parent, prefix = paths.CONFIG_CHANGES, paths.CONFIG_CHANGE_PREFIX
        listed = self._session.handle_request("get_children_async", parent)
        if isinstance(listed, NoNodeError):
            return
        if isinstance(listed, ZookeeperError):
            raise _refused(parent, listed)
        old = [
            paths.config_change_path(name)
            for name in listed
            if name.startswith(prefix) and paths.sequence_number(name, prefix) <= up_to_seq
        ]
        self._session.delete_recursive(old, None)

    # --- producer ids: /latest_producer_id_block ------------------------------------------

    def get_latest_producer_id_block(self) -> tuple[ProducerIdBlock | None, int | None]:
        """Read the block claimed last and the znode version.

        Returns:
            ``(block, version)``; the block is None when the znode is empty (created at
            broker start-up, before any claim) and both are None when it is missing.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: the znode is not Kafka's format.
        """
        path = paths.LATEST_PRODUCER_ID_BLOCK
        result = self._session.handle_request("get_async", path)
        if isinstance(result, NoNodeError):
            return None, None
        if isinstance(result, ZookeeperError):
            raise _refused(path, result)
        data, stat = result
        block = decode_producer_id_block(data) if data else None
        return block, int(stat.version)

    def claim_producer_id_block(
        self, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE
    ) -> ProducerIdBlock:
        """Claim the next block of producer ids for ``broker_id``.

        Reads the latest block and writes the one after it, conditional on the znode
        version read; when another broker wrote first, reads again and retries. A
        missing znode is created with the first block (ids from 0).

        Args:
            broker_id: the claiming broker (recorded in the znode).
            size: ids per block (Kafka always uses 1000).

        Returns:
            The claimed block; no other broker can claim an overlapping one.

        Raises:
            ProducerIdsExhaustedError: no block left in the int64 range.
            ZkConnectionLossError: the session failed (the claim may or may not have
                been written; retrying claims a fresh block, wasting at most one).
            ZkOperationError: ZooKeeper refused the write, or 100 compare-and-sets
                in a row were all lost.
            MalformedZNodeDataError: the znode is not Kafka's format.
        """
        path = paths.LATEST_PRODUCER_ID_BLOCK
        for _ in range(_PRODUCER_ID_CLAIM_ATTEMPTS):
            current, version = self.get_latest_producer_id_block()
            block = next_producer_id_block(current, broker_id, size)
            data = encode_producer_id_block(block)
            if version is None:
                created = self._session.handle_request("create_async", path, data, makepath=True)
                if isinstance(created, NodeExistsError):
                    continue
                if isinstance(created, ZookeeperError):
                    raise _refused(path, created)
                return block
            if self._session.set_or_create(path, data, expected_version=version) is not None:
                return block
        raise ZkOperationError(
            path, f"lost {_PRODUCER_ID_CLAIM_ATTEMPTS} compare-and-sets in a row"
        )

    # --- watches --------------------------------------------------------------------------

    def watch_children(self, path: str, callback: WatchCallback) -> ZkWatch:
        """Call ``callback`` with CHILDREN_CHANGED each time ``path``'s children change.

        ``path`` is created if missing (a children watch needs an existing znode); the
        watch ends if the znode is deleted.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        self._session.ensure_paths([path])
        handle = ZkWatch(path)
        self._session.add_children_watch(path, children_watcher(handle, callback))
        return handle

    def watch_data(self, path: str, callback: WatchCallback) -> ZkWatch:
        """Call ``callback`` when ``path`` is created, deleted or its data changes.

        The znode need not exist. One watch of :meth:`watch_data_many`.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        return self._session.add_data_watches([(path, callback)])[0]

    def watch_data_many(self, watched: Sequence[tuple[str, WatchCallback]]) -> list[ZkWatch]:
        """Watch many znodes as :meth:`watch_data` does, installed in one pipelined batch.

        For the state znodes of the partitions of a large reassignment: installing costs
        about ``len / zookeeper.max.in.flight.requests`` round trips instead of one per
        znode, and the changes of many are delivered together
        (:class:`~kpo_broker.zk.data_watches.DataWatchSet`).

        Returns:
            per ``(path, callback)``, in order, the handle that cancels its watch.

        Raises:
            ZkConnectionLossError: the session failed.
            ZkOperationError: ZooKeeper refused to watch a znode.
        """
        return self._session.add_data_watches(watched)

    def watch_broker_ids(self, callback: WatchCallback) -> ZkWatch:
        """Watch ``/brokers/ids`` children: brokers joining or failing (BrokerChangeListener)."""
        return self.watch_children(paths.BROKER_IDS, callback)

    def watch_topics(self, callback: WatchCallback) -> ZkWatch:
        """Watch ``/brokers/topics`` children: topics created or deleted (TopicChangeListener)."""
        return self.watch_children(paths.BROKER_TOPICS, callback)

    def watch_topic_assignment(self, topic: str, callback: WatchCallback) -> ZkWatch:
        """Watch ``/brokers/topics/<topic>``: partitions added or AR changed (AddPartitions)."""
        return self.watch_data(paths.topic_path(topic), callback)

    def watch_topic_deletions(self, callback: WatchCallback) -> ZkWatch:
        """Watch ``/admin/delete_topics`` children: topics queued for deletion."""
        return self.watch_children(paths.ADMIN_DELETE_TOPICS, callback)

    def watch_isr_change_notifications(self, callback: WatchCallback) -> ZkWatch:
        """Watch ``/isr_change_notification`` children: leaders announcing ISR changes."""
        return self.watch_children(paths.ISR_CHANGE_NOTIFICATION, callback)

    def watch_partition_reassignment(self, callback: WatchCallback) -> ZkWatch:
        """Watch ``/admin/reassign_partitions`` (Kafka's PartitionReassignmentHandler)."""
        return self.watch_data(paths.ADMIN_REASSIGN_PARTITIONS, callback)

    def watch_preferred_replica_election(self, callback: WatchCallback) -> ZkWatch:
        """Watch ``/admin/preferred_replica_election`` (PreferredReplicaElectionListener)."""
        return self.watch_data(paths.ADMIN_PREFERRED_REPLICA_ELECTION, callback)

    def watch_controller(self, callback: WatchCallback) -> ZkWatch:
        """Watch ``/controller``: brokers re-elect when it is deleted (controller failover)."""
        return self.watch_data(paths.CONTROLLER, callback)

    def watch_config_changes(self, callback: WatchCallback) -> ZkWatch:
        """Watch ``/config/changes`` children: dynamic config change notifications."""
        return self.watch_children(paths.CONFIG_CHANGES, callback)

    # --- ACLs: /kafka-acl, /kafka-acl-extended and their change notifications ------------
    # The formats are in kpo_broker.security.acl; these are the znode operations Kafka's
    # KafkaZkClient offers its AclAuthorizer (createAclPaths, getVersionedAclsForResource,
    # conditionalSetAclsForResource, createAclsForResourceIfNotExists, conditionalDelete,
    # createAclChangeNotification).

    def ensure_acl_paths(self, znode_paths: Sequence[str]) -> None:
        """Create the ACL roots and change roots that do not exist (``createAclPaths``).

        Raises:
            ZkConnectionLossError: the session failed.
        """
        self._session.ensure_paths(list(znode_paths))

    def get_children(self, path: str) -> set[str]:
        """Return the children of ``path``; an absent znode has none.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        return self._children(path)

    def get_versioned_data(self, path: str) -> tuple[bytes, int] | None:
        """Return a znode's data and version, or None when it does not exist.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        result = self._session.handle_request("get_async", path)
        if isinstance(result, NoNodeError):
            return None
        if isinstance(result, ZookeeperError):
            raise _refused(path, result)
        return bytes(result[0] or b""), int(result[1].version)

    def conditional_set_data(self, path: str, data: bytes, expected_version: int) -> int | None:
        """Set a znode's data if its version is ``expected_version``; return the new version.

        Returns:
            the new version, or None when the znode changed or vanished meanwhile.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        result = self._session.handle_request("set_async", path, data, expected_version)
        if isinstance(result, BadVersionError | NoNodeError):
            return None
        if isinstance(result, ZookeeperError):
            raise _refused(path, result)
        return int(result.version)

    def create_if_not_exists(self, path: str, data: bytes) -> bool:
        """Create a persistent znode (and its parents); False when it already exists.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        result = self._session.handle_request("create_async", path, data, makepath=True)
        if isinstance(result, NodeExistsError):
            return False
        if isinstance(result, ZookeeperError):
            raise _refused(path, result)
        return True

    def conditional_delete(self, path: str, expected_version: int) -> bool:
        """Delete a znode if its version is ``expected_version`` (absent counts as deleted).

        Returns:
            False when the znode changed meanwhile.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        result = self._session.handle_request("delete_async", path, expected_version)
        if isinstance(result, BadVersionError):
            return False
        if isinstance(result, ZookeeperError) and not isinstance(result, NoNodeError):
            raise _refused(path, result)
        return True

    def create_sequential(self, parent: str, prefix: str, data: bytes) -> str:
        """Create a persistent sequential znode ``<parent>/<prefix><seq>``; return its name.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        path = f"{parent}/{prefix}"
        result = self._session.handle_request(
            "create_async", path, data, sequence=True, makepath=True
        )
        if isinstance(result, ZookeeperError):
            raise _refused(path, result)
        return str(result).rsplit("/", 1)[-1]

    def get_sequential_notifications(
        self, parent: str, prefix: str, since_seq: int = -1
    ) -> list[tuple[int, bytes, int]]:
        """Read the sequential znodes of ``parent`` numbered above ``since_seq``, pipelined.

        Returns:
            ``(sequence number, data, creation time in ms)``, oldest first; znodes purged
            meanwhile are skipped.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        names = [
            (seq, name)
            for name in self._sequential_children(parent, prefix)
            if (seq := paths.sequence_number(name, prefix)) > since_seq
        ]
        znodes = [f"{parent}/{name}" for _, name in names]
        results = self._session.get_many(znodes)
        out: list[tuple[int, bytes, int]] = []
        for (seq, _), path, result in zip(names, znodes, results, strict=True):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, ZookeeperError):
                raise _refused(path, result)
            out.append((seq, bytes(result[0] or b""), int(result[1].ctime)))
        return out

    def delete_znodes(self, znode_paths: Sequence[str]) -> None:
        """Delete znodes and their children (absent ones are skipped).

        Raises:
            ZkConnectionLossError: the session failed.
        """
        self._session.delete_recursive(list(znode_paths), None)
