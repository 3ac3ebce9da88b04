"""KafkaController: election through ``/controller``, failover, resignation, event dispatch.

Every broker runs one (seed 001 "Controller"): the first to create the ephemeral
``/controller`` znode (bumping ``/controller_epoch`` in the same multi) is the active
controller; the others watch ``/controller`` and run for election when it disappears.
On winning, the controller *fails over* (seed 001 §D): it registers its watches, loads
the cluster from ZooKeeper into its :class:`ControllerContext`, sends UpdateMetadata to
all live brokers, starts the replica and partition state machines (partitions with a
live leader Online, the others elected or Offline), resumes topic deletions and pending
preferred elections, and schedules the auto leader rebalance.

It resigns (drops its state, its watches and its connections, and goes back to watching
``/controller``) when ``/controller`` names another broker, when a ZooKeeper write is
fenced by ``/controller_epoch`` (:class:`ControllerMovedError`), or when its ZooKeeper
session expires; after a new session it runs for election again.

All work happens on the event thread (:mod:`kpo_broker.controller.event_manager`);
the public methods only enqueue events.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future

from kpo_broker.config import BrokerConfig
from kpo_broker.controller.base import NO_CONTROLLER
from kpo_broker.controller.broker_events import BrokerEventsMixin
from kpo_broker.controller.channel_manager import ConnectionFactory
from kpo_broker.controller.context import ControllerContext
from kpo_broker.controller.errors import ControllerError, NotControllerError
from kpo_broker.controller.event_manager import ControllerEventManager
from kpo_broker.controller.events import (
    AlterPartitionReassignments,
    AutoPreferredReplicaLeaderElection,
    BrokerChange,
    BrokerModifications,
    ControlledShutdown,
    ControllerChange,
    ControllerEvent,
    ElectionResults,
    ElectionType,
    ElectLeaders,
    Expire,
    IsrChangeNotification,
    ListPartitionReassignments,
    PartitionModifications,
    PartitionReassignmentIsrChange,
    PreferredReplicaElectionZNode,
    ReassignmentResults,
    Reelect,
    SessionReestablished,
    Startup,
    TopicChange,
    TopicDeletion,
    TopicDeletionStopReplicaResponseReceived,
    ZkPartitionReassignment,
)
from kpo_broker.controller.failover import FailoverMixin
from kpo_broker.controller.partition_state_machine import PartitionStateMachine
from kpo_broker.controller.replica_state_machine import ReplicaStateMachine
from kpo_broker.controller.request_batch import ControllerBrokerRequestBatch, RequestVersions
from kpo_broker.controller.scheduler import RepeatingTask
from kpo_broker.controller.topic_deletion import TopicDeletionManager
from kpo_broker.controller.topic_events import TopicEventsMixin
from kpo_broker.controller.watches import ControllerWatches
from kpo_broker.zk.client import KafkaZkClient
from kpo_broker.zk.errors import ControllerMovedError
from kpo_broker.zk.model import ReplicaAssignment, TopicPartition
from kpo_broker.zk.session import ZkSessionState
from kpo_broker.zk.watches import ZkWatch, ZkWatchEvent, ZkWatchEventType

_log = logging.getLogger("kpo_broker.controller")

#: Delay of the first auto rebalance check after failover, in seconds (as in Kafka).
AUTO_REBALANCE_INITIAL_DELAY_S = 5.0


class KafkaController(BrokerEventsMixin, TopicEventsMixin, FailoverMixin):
    """The controller of one broker (active or standby).

    Args:
        config: the broker's config: ``broker.id``, ``inter.broker.listener.name``,
            ``controller.socket.timeout.ms``, ``unclean.leader.election.enable``,
            ``delete.topic.enable``, ``auto.leader.rebalance.enable``,
            ``leader.imbalance.per.broker.percentage``,
            ``leader.imbalance.check.interval.seconds``.
        zk: the broker's connected ZooKeeper client (the broker registers itself with
            it; the controller never closes it).
        connection_factory: builds the connections to brokers (default: ``BrokerClient``).
        request_versions: versions of LeaderAndIsr / UpdateMetadata / StopReplica.
        auto_rebalance_initial_delay_s: delay of the first auto rebalance check.
        channel_retry_backoff_ms: pause before resending a failed broker request.
    """

    def __init__(
        self,
        config: BrokerConfig,
        zk: KafkaZkClient,
        *,
        connection_factory: ConnectionFactory | None = None,
        request_versions: RequestVersions | None = None,
        auto_rebalance_initial_delay_s: float = AUTO_REBALANCE_INITIAL_DELAY_S,
        channel_retry_backoff_ms: int = 100,
    ) -> None:
        self.config = config
        self.zk = zk
        self.context = ControllerContext()
        self.event_manager = ControllerEventManager(self)
        self.watches = ControllerWatches(zk, self.event_manager.put)
        self.batch = ControllerBrokerRequestBatch(
            self.context,
            self,
            controller_id=config.broker_id,
            listener_name=config.inter_broker_listener,
            versions=request_versions,
            on_stop_replica_response=self.on_stop_replica_response,
        )
        self.partition_state_machine = PartitionStateMachine(
            self.context,
            zk,
            self.batch,
            unclean_leader_election_enable=config.unclean_leader_election_enable,
        )
        self.replica_state_machine = ReplicaStateMachine(self.context, zk, self.batch)
        self.topic_deletion_manager = TopicDeletionManager(
            self.context,
            zk,
            self.partition_state_machine,
            self.replica_state_machine,
            send_update_metadata=self.send_update_metadata_request,
            on_topic_deleted=self.watches.unwatch_topic,
            delete_topic_enable=config.delete_topic_enable,
        )
        self.channel_manager = None
        self._active_controller_id = NO_CONTROLLER
        self._connection_factory = connection_factory
        self._channel_retry_backoff_ms = channel_retry_backoff_ms
        self._auto_rebalance_initial_delay_s = auto_rebalance_initial_delay_s
        self._rebalance_task: RepeatingTask | None = None
        self._controller_watch: ZkWatch | None = None
        self._session_expired = False

    # --- public API (any thread) ----------------------------------------------------------

    def startup(self) -> None:
        """Listen to the ZooKeeper session, start the event thread and run for election.

        Returns at once; the election happens on the event thread.
        """
        self.zk.add_session_listener(self._on_session_state)
        self.event_manager.put(Startup())
        self.event_manager.start()

    def shutdown(self) -> None:
        """Stop the event thread (failing waiting requests with NOT_CONTROLLER) and resign.

        ``/controller`` is not deleted: it vanishes with the broker's ZooKeeper session,
        which the broker closes after this.
        """
        self.event_manager.close()
        if self._controller_watch is not None:
            self._controller_watch.cancel()
            self._controller_watch = None
        self._active_controller_id = NO_CONTROLLER
        self._on_controller_resignation()

    @property
    def controller_epoch(self) -> int:
        """The controller epoch this broker last won with (0 before any win)."""
        return self.context.epoch

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Future[set[TopicPartition]]:
        """Ask the controller to move ``broker_id``'s leaders away (ControlledShutdown API).

        Args:
            broker_id: the broker shutting down.
            broker_epoch: its broker epoch, or -1 when the request (v0-v1) has none.

        Returns:
            a future of the partitions the broker still leads (empty: it may stop), or
            failed with a :class:`ControllerError` whose ``error_code`` is the response's
            (NOT_CONTROLLER, STALE_BROKER_EPOCH, BROKER_NOT_AVAILABLE).
        """
        event = ControlledShutdown(broker_id, broker_epoch)
        self.event_manager.put(event)
        return event.result

    def elect_leaders(
        self, partitions: Iterable[TopicPartition] | None, election_type: ElectionType
    ) -> Future[ElectionResults]:
        """Run leader elections for the ElectLeaders API (KIP-183, KIP-460).

        Args:
            partitions: the partitions, or None for all partitions.
            election_type: preferred or unclean.

        Returns:
            a future of partition -> (error code, message), or failed with
            :class:`NotControllerError` when this broker is not the controller.
        """
        wanted = None if partitions is None else frozenset(partitions)
        event = ElectLeaders(wanted, ElectionType(election_type))
        self.event_manager.put(event)
        return event.result

    def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Sequence[int] | None]
    ) -> Future[ReassignmentResults]:
        """Start, change or cancel reassignments (AlterPartitionReassignments API, KIP-455).

        Args:
            reassignments: partition -> target replicas (RAR), or None to cancel.

        Returns:
            a future of partition -> (error code, message): 0, UNKNOWN_TOPIC_OR_PARTITION,
            INVALID_REPLICA_ASSIGNMENT or NO_REASSIGNMENT_IN_PROGRESS; failed with
            :class:`NotControllerError` when this broker is not the controller.
        """
        event = AlterPartitionReassignments(
            {tp: None if r is None else tuple(r) for tp, r in reassignments.items()}
        )
        self.event_manager.put(event)
        return event.result

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None
    ) -> Future[dict[TopicPartition, ReplicaAssignment]]:
        """List running reassignments (ListPartitionReassignments API, KIP-455).

        Args:
            partitions: the partitions to look at, or None for all.

        Returns:
            a future of partition -> assignment (AR, adding, removing replicas) of the
            partitions being reassigned; failed with :class:`NotControllerError` when
            this broker is not the controller.
        """
        wanted = None if partitions is None else frozenset(partitions)
        event = ListPartitionReassignments(wanted)
        self.event_manager.put(event)
        return event.result

    # --- event processing (event thread) ------------------------------------------------

    def preempt(self, event: ControllerEvent) -> None:
        """Answer an event that will not be processed with NOT_CONTROLLER."""
        event.preempt(NotControllerError(f"controller did not process {event.name}"))

    def process(self, event: ControllerEvent) -> None:
        """Apply one event (event thread only); fenced writes make the controller resign."""
        try:
            self._dispatch(event)
        except ControllerMovedError as exc:
            _log.info("controller moved while processing %s: %s", event.name, exc)
            event.preempt(NotControllerError(str(exc)))
            self._maybe_resign()
        except ControllerError as exc:
            event.preempt(exc)
        except Exception as exc:
            _log.exception("error processing %s", event.name)
            event.preempt(ControllerError(f"{event.name} failed: {exc!r}"))

    def _dispatch(self, event: ControllerEvent) -> None:
        if isinstance(event, Startup):
            self._process_startup()
        elif isinstance(event, ControllerChange):
            self._maybe_resign()
        elif isinstance(event, Reelect | SessionReestablished):
            self._maybe_resign()
            self._elect()
        elif isinstance(event, Expire):
            self._active_controller_id = NO_CONTROLLER
            self._on_controller_resignation()
        elif isinstance(event, BrokerChange):
            self.process_broker_change()
        elif isinstance(event, BrokerModifications):
            self.process_broker_modifications(event.broker_id)
        elif isinstance(event, TopicChange):
            self.process_topic_change()
        elif isinstance(event, PartitionModifications):
            self.process_partition_modifications(event.topic)
        elif isinstance(event, TopicDeletion):
            self.process_topic_deletion()
        elif isinstance(event, TopicDeletionStopReplicaResponseReceived):
            self.process_topic_deletion_stop_replica_response(event)
        elif isinstance(event, IsrChangeNotification):
            self.process_isr_change_notification()
        elif isinstance(event, PreferredReplicaElectionZNode):
            self.process_preferred_replica_election_znode()
        elif isinstance(event, AutoPreferredReplicaLeaderElection):
            self.process_auto_preferred_replica_leader_election()
        elif isinstance(event, ControlledShutdown):
            self.process_controlled_shutdown(event)
        elif isinstance(event, ElectLeaders):
            self.process_elect_leaders(event)
        elif isinstance(event, AlterPartitionReassignments):
            self.process_alter_partition_reassignments(event)
        elif isinstance(event, ListPartitionReassignments):
            self.process_list_partition_reassignments(event)
        elif isinstance(event, ZkPartitionReassignment):
            self.process_zk_partition_reassignment()
        elif isinstance(event, PartitionReassignmentIsrChange):
            self.process_partition_reassignment_isr_change(event.topic_partition)
        else:
            _log.warning("ignoring unknown controller event %s", event.name)

    # --- election and resignation ------------------------------------------------------

    def _on_session_state(self, state: ZkSessionState) -> None:
        """Kazoo thread: turn session expiry and re-establishment into events."""
        if state is ZkSessionState.EXPIRED:
            self._session_expired = True
            self.event_manager.clear_and_put(Expire())
        elif state is ZkSessionState.CONNECTED and self._session_expired:
            self._session_expired = False
            self.event_manager.put(SessionReestablished())

    def _on_controller_znode(self, event: ZkWatchEvent) -> None:
        """Kazoo thread: ``/controller`` changed."""
        if event.type is ZkWatchEventType.DELETED:
            self.event_manager.put(Reelect())
        else:
            self.event_manager.put(ControllerChange())

    def _process_startup(self) -> None:
        if self._controller_watch is None:
            self._controller_watch = self.zk.watch_controller(self._on_controller_znode)
        self._elect()

    def _read_active_controller_id(self) -> int:
        active = self.zk.get_controller_id()
        self._active_controller_id = NO_CONTROLLER if active is None else active
        return self._active_controller_id

    def _elect(self) -> None:
        """Run for election; fail over on winning (seed 001 §D step 1)."""
        if self._read_active_controller_id() != NO_CONTROLLER:
            _log.debug("broker %s is the controller", self._active_controller_id)
            return
        try:
            won = self.zk.try_elect_controller(self.broker_id)
            if won is None:
                self._read_active_controller_id()
                return
            self.context.epoch, self.context.epoch_zk_version = won.epoch, won.zk_version
            self._active_controller_id = self.broker_id
            _log.info("broker %s is the controller with epoch %s", self.broker_id, won.epoch)
            self._on_controller_failover()
        except ControllerMovedError:
            self._maybe_resign()
        except Exception:
            _log.exception("controller failover failed")
            self._trigger_controller_move()

    def _maybe_resign(self) -> None:
        was_active = self.is_active
        self._read_active_controller_id()
        if was_active and not self.is_active:
            self._on_controller_resignation()

    def _trigger_controller_move(self) -> None:
        """Give up after a failed failover: resign and delete ``/controller`` if still ours."""
        zk_version = self.context.epoch_zk_version
        self._active_controller_id = NO_CONTROLLER
        self._on_controller_resignation()
        try:
            self.zk.resign_controller(zk_version)
        except Exception:
            _log.exception("could not delete /controller")
