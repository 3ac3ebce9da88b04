"""KafkaController: election through ``/controller``, failover, resignation, event handling.

Every broker runs one (Kafka's ``KafkaController``): the first to create the ephemeral
``/controller`` znode (bumping ``/controller_epoch`` in the same multi) is the active
controller; the others watch ``/controller`` and run for election when it disappears.

The controller owns the event queue (:mod:`kpo_broker.controller.event_manager`): all
work happens on the event thread, the public methods only enqueue events, and
:meth:`KafkaController.process` hands each event to its handler here. The handlers
delegate the heavy lifting to collaborators that own their state and get the context
(and what else they need) in their constructors: the
:class:`~kpo_broker.controller.partition_state_machine.PartitionStateMachine` and
:class:`~kpo_broker.controller.replica_state_machine.ReplicaStateMachine`, the
:class:`~kpo_broker.controller.topic_deletion.TopicDeletionManager`, the
:class:`~kpo_broker.controller.reassignment.ReassignmentManager` (KIP-455) and the
:class:`~kpo_broker.controller.replica_election.ReplicaElectionManager`.

Failover (Kafka's ``onControllerFailover``): on winning the election the controller
registers its watches *before* reading ZooKeeper, deletes stale ISR change
notifications, loads brokers, topics, assignments and partition states into its
:class:`ControllerContext`, connects to every live broker, queues the pending topic
deletions, sends UpdateMetadata to all live brokers (before any LeaderAndIsr, so brokers
know the live brokers first), starts the replica then the partition state machine
(partitions with a live leader Online, the others elected or Offline), resumes
reassignments (the ``/admin/reassign_partitions`` znode's, then those with
adding/removing replicas in ZooKeeper, KIP-455), deletions and pending preferred
elections, and schedules the auto leader rebalance.

It resigns (Kafka's ``onControllerResignation``: drops its state, its watches and its
connections, and goes back to watching ``/controller``) when ``/controller`` names
another broker, when a ZooKeeper write is fenced by ``/controller_epoch``
(:class:`ControllerMovedError`), or when its ZooKeeper session expires; after a new
session it runs for election again.

Broker events (Kafka's ``onBrokerStartup``, ``onBrokerFailure``, ``doControlledShutdown``):

- BrokerChange (``/brokers/ids`` children): new, dead and *bounced* brokers (same id,
  newer broker epoch: it restarted between two reads) are told apart by comparing the
  registrations with the context (KIP-380).
- Broker startup: the other brokers get UpdateMetadata with the new broker; the new
  broker gets UpdateMetadata with every partition, then LeaderAndIsr for every replica
  it hosts (OnlineReplica); offline and new partitions are elected (it may lead some
  now); reassignments with target replicas on it are resumed (KIP-455); halted topic
  deletions with replicas on it resume.
- Broker failure: partitions it led go OfflinePartition and are elected from the live
  ISR (or unclean, if allowed; else they stay offline with leader -1); its replicas go
  OfflineReplica, which removes it from the ISRs it was in; each write bumps the leader
  epoch; all writes are batched.
- ControlledShutdown: leadership of the broker's partitions moves to other ISR members
  (controlled-shutdown election), it leaves the ISRs of the partitions it follows, and
  the partitions it still leads are returned; the broker retries until none is left.
- LogDirEventNotification (``/log_dir_event_notification`` children): a broker's log
  dir failed; every replica of that broker gets LeaderAndIsr again (OnlineReplica), and
  the partitions it answers KAFKA_STORAGE_ERROR for become its offline replicas
  (``replicas_on_offline_dirs``): they go OfflineReplica and their partitions elect a
  leader from the rest of the ISR, as for a broker failure. A restart of the broker
  (a new registration) forgets them, so its repaired replicas come back online.

Topic events (Kafka's ``onNewPartitionCreation`` and the topic deletion handlers):

- TopicChange (``/brokers/topics`` children): new topics' assignments are read and
  their partitions created: NewPartition / NewReplica, then OnlinePartition (leader =
  first live replica of AR, ISR = live replicas of AR, state znodes created in one
  batch) and OnlineReplica; the replicas get LeaderAndIsr, every broker UpdateMetadata.
- PartitionModifications (``/brokers/topics/<topic>``): partitions added to a topic are
  created the same way.
- TopicDeletion (``/admin/delete_topics`` children): topics are queued in the
  :class:`~kpo_broker.controller.topic_deletion.TopicDeletionManager`, or the markers
  removed when ``delete.topic.enable`` is false.
- StopReplica responses of deletions advance the deletion.
- AlterPartition (KIP-497): a leader asks for ISR changes; each is checked against the
  context (:mod:`~kpo_broker.controller.alter_partition`), the accepted ones written in
  batched compare-and-sets, every broker gets UpdateMetadata of the partitions asked
  about, and reassignments whose targets all joined the ISR complete.
- IsrChangeNotification: leaders that write their ISR themselves (Kafka's path before
  KIP-497) changed ISRs; the states are re-read and sent to every broker in
  UpdateMetadata, then the notifications are deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from kpo_broker.config import BrokerConfig
from kpo_broker.controller.alter_partition import (
    INVALID_UPDATE_VERSION,
    UNKNOWN_TOPIC_OR_PARTITION,
    AlterPartitionResult,
    ProposedIsr,
    decide_alter_partition,
)
from kpo_broker.controller.channel_manager import ConnectionFactory, ControllerChannelManager
from kpo_broker.controller.context import ControllerContext, PartitionAndReplica
from kpo_broker.controller.errors import (
    BrokerNotAvailableError,
    ControllerError,
    NotControllerError,
    StaleBrokerEpochError,
)
from kpo_broker.controller.event_manager import ControllerEventManager
from kpo_broker.controller.events import (
    AlterPartitionReassignments,
    AlterPartitionReceived,
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
    LeaderAndIsrResponseReceived,
    ListPartitionReassignments,
    LogDirEventNotification,
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
    TopicUncleanLeaderElectionEnable,
    ZkPartitionReassignment,
)
from kpo_broker.controller.leader_election import (
    ControlledShutdownPartitionLeaderElection,
    OfflinePartitionLeaderElection,
)
from kpo_broker.controller.partition_state_machine import PartitionStateMachine
from kpo_broker.controller.reassignment import ReassignmentManager
from kpo_broker.controller.replica_election import ReplicaElectionManager
from kpo_broker.controller.replica_state_machine import ReplicaStateMachine
from kpo_broker.controller.request_batch import (
    ControllerBrokerRequestBatch,
    RequestVersions,
    ResponseCallback,
)
from kpo_broker.controller.scheduler import RepeatingTask
from kpo_broker.controller.states import PartitionState, ReplicaState
from kpo_broker.controller.topic_deletion import TopicDeletionManager
from kpo_broker.controller.watches import ControllerWatches
from kpo_broker.zk.client import KafkaZkClient
from kpo_broker.zk.data import new_topic_id
from kpo_broker.zk.errors import ControllerMovedError
from kpo_broker.zk.model import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicAssignment,
)
from kpo_broker.zk.session import ZkSessionState
from kpo_broker.zk.watches import ZkWatch, ZkWatchEvent, ZkWatchEventType
from kpo_kafka.topic_partition import TopicPartition

_log = logging.getLogger("kpo_broker.controller")

#: ``active_controller_id`` when no controller is known.
NO_CONTROLLER = -1

#: Delay of the first auto rebalance check after failover, in seconds (as in Kafka).
AUTO_REBALANCE_INITIAL_DELAY_S = 5.0

#: ControlledShutdown broker epoch of requests older than v2 (KIP-380): not checked.
UNKNOWN_BROKER_EPOCH = -1

#: StopReplica response error code when the request itself failed (no partition errors).
_NONE = 0
#: KAFKA_STORAGE_ERROR: the replica is in an offline log dir.
_STORAGE_ERROR = 56


class KafkaController:
    """The controller of one broker (active or standby); see the module docstring.

    Everything but the read-only properties and the public request methods is touched
    only by the event thread.

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

    Attributes:
        config: the broker's configuration.
        zk: the broker's ZooKeeper client (its session also holds the broker registration).
        context: cached cluster metadata, valid while active.
        event_manager: the event queue and thread.
        watches: the active controller's watches.
        batch: the request batch the state machines fill.
        partition_state_machine: partition states.
        replica_state_machine: replica states.
        topic_deletion_manager: topic deletions.
        reassignment_manager: partition reassignments (KIP-455).
        replica_election_manager: preferred, unclean and auto-rebalance elections.
        channel_manager: connections to the brokers, while active.
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
            on_stop_replica_response=self._on_stop_replica_response,
            on_leader_and_isr_response=self._on_leader_and_isr_response,
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
        self.reassignment_manager = ReassignmentManager(
            self.context,
            zk,
            self.batch,
            self.partition_state_machine,
            self.replica_state_machine,
            self.topic_deletion_manager,
            self.watches,
            send_update_metadata=self.send_update_metadata_request,
        )
        self.replica_election_manager = ReplicaElectionManager(
            self.context,
            zk,
            self.partition_state_machine,
            self.topic_deletion_manager,
            leader_imbalance_per_broker_percentage=config.leader_imbalance_per_broker_percentage,
        )
        self.channel_manager: ControllerChannelManager | None = None
        self._active_controller_id = NO_CONTROLLER
        self._connection_factory = connection_factory
        self._channel_retry_backoff_ms = channel_retry_backoff_ms
        self._auto_rebalance_initial_delay_s = auto_rebalance_initial_delay_s
        self._rebalance_task: RepeatingTask | None = None
        self._controller_watch: ZkWatch | None = None

    # --- public API (any thread) ----------------------------------------------------------

    @property
    def broker_id(self) -> int:
        """Return the id of the broker running this controller (``broker.id``)."""
        return self.config.broker_id

    @property
    def is_active(self) -> bool:
        """Whether this broker is the active controller; safe to read from any thread."""
        return self._active_controller_id == self.config.broker_id

    @property
    def active_controller_id(self) -> int:
        """The controller this broker knows of, or -1 (as last read from ``/controller``)."""
        return self._active_controller_id

    @property
    def controller_epoch(self) -> int:
        """The controller epoch this broker last won with (0 before any win)."""
        return self.context.epoch

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

    def alter_partitions(
        self,
        broker_id: int,
        broker_epoch: int,
        proposals: Mapping[TopicPartition, ProposedIsr],
        proposals_by_topic_id: Mapping[str, Mapping[int, ProposedIsr]],
        request_version: int,
    ) -> Future[AlterPartitionResult]:
        """Apply a leader's ISR changes (AlterPartition API, KIP-497).

        Args:
            broker_id: the leader.
            broker_epoch: its broker epoch.
            proposals: partition -> proposed change, for topics named by name (v0-v1).
            proposals_by_topic_id: Kafka topic id -> partition index -> proposed change
                (v2+).
            request_version: the AlterPartition version.

        Returns:
            a future of the per-partition outcome, or failed with
            :class:`NotControllerError` or :class:`StaleBrokerEpochError` (the leader
            is not registered under ``broker_epoch``).
        """
        event = AlterPartitionReceived(
            broker_id, broker_epoch, proposals, proposals_by_topic_id, request_version
        )
        self.event_manager.put(event)
        return event.result

    def enable_topic_unclean_leader_election(self, topic: str) -> None:
        """Elect the offline partitions of ``topic`` now that it allows unclean elections.

        Kafka's ``KafkaController.enableTopicUncleanLeaderElection``: queued on the event
        thread; a no-op unless this controller is active.
        """
        self.event_manager.put(TopicUncleanLeaderElectionEnable(topic))

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

    # --- event processing (event thread) --------------------------------------------------

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
            self._process_broker_change()
        elif isinstance(event, BrokerModifications):
            self._process_broker_modifications(event.broker_id)
        elif isinstance(event, TopicChange):
            self._process_topic_change()
        elif isinstance(event, PartitionModifications):
            self._process_partition_modifications(event.topic)
        elif isinstance(event, TopicDeletion):
            self._process_topic_deletion()
        elif isinstance(event, TopicDeletionStopReplicaResponseReceived):
            self._process_topic_deletion_stop_replica_response(event)
        elif isinstance(event, AlterPartitionReceived):
            self._process_alter_partition(event)
        elif isinstance(event, IsrChangeNotification):
            self._process_isr_change_notification()
        elif isinstance(event, LogDirEventNotification):
            self._process_log_dir_event_notification()
        elif isinstance(event, LeaderAndIsrResponseReceived):
            self._process_leader_and_isr_response(event)
        elif isinstance(event, PreferredReplicaElectionZNode):
            self._process_preferred_replica_election_znode()
        elif isinstance(event, AutoPreferredReplicaLeaderElection):
            self._process_auto_preferred_replica_leader_election()
        elif isinstance(event, ControlledShutdown):
            self._process_controlled_shutdown(event)
        elif isinstance(event, ElectLeaders):
            self._process_elect_leaders(event)
        elif isinstance(event, AlterPartitionReassignments):
            self._process_alter_partition_reassignments(event)
        elif isinstance(event, ListPartitionReassignments):
            self._process_list_partition_reassignments(event)
        elif isinstance(event, ZkPartitionReassignment):
            self._process_zk_partition_reassignment()
        elif isinstance(event, PartitionReassignmentIsrChange):
            queued = self.event_manager.take_queued(PartitionReassignmentIsrChange)
            self._process_partition_reassignment_isr_changes(
                [event.topic_partition, *(e.topic_partition for e in queued)]
            )
        elif isinstance(event, TopicUncleanLeaderElectionEnable):
            if self.is_active:
                self.partition_state_machine.trigger_online_partition_state_change(event.topic)
        else:
            _log.warning("ignoring unknown controller event %s", event.name)

    # --- requests to brokers --------------------------------------------------------------

    def send_request(
        self,
        broker_id: int,
        request: Any,
        api_version: int,
        callback: ResponseCallback | None = None,
    ) -> None:
        """Queue a request on the channel manager (the batch's :class:`RequestSender`).

        Dropped when the controller is not active (no channel manager).
        """
        channel = self.channel_manager
        if channel is None:
            _log.warning("not sending %s: the controller is not active", type(request).__name__)
            return
        channel.send_request(broker_id, request, api_version, callback)

    def send_update_metadata_request(
        self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition]
    ) -> None:
        """Send UpdateMetadata (live brokers + ``partitions``' states) to ``broker_ids``.

        Errors are logged (Kafka's ``sendUpdateMetadataRequest``); nothing is written.
        """
        try:
            self.batch.new_batch()
            self.batch.add_update_metadata_request_for_brokers(broker_ids, partitions)
            self.batch.send_requests_to_brokers(self.context.epoch)
        except Exception:
            _log.exception("failed to send UpdateMetadata")
            self.batch.clear()

    # --- controller election (/controller) ------------------------------------------------

    def _on_session_state(self, state: ZkSessionState) -> None:
        """Kazoo thread: turn session expiry and re-establishment into events.

        Kafka's ``beforeInitializingSession`` (queue :class:`Expire` alone: the queued
        events belong to the lost session) and ``afterInitializingSession``
        (:class:`SessionReestablished`: run for election again on the new session).
        """
        if state is ZkSessionState.EXPIRED:
            self.event_manager.clear_and_put(Expire())
        elif state is ZkSessionState.NEW_SESSION:
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
        """Run for election; fail over on winning (Kafka's ``elect``)."""
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

    # --- failover and resignation ---------------------------------------------------------

    def _on_controller_failover(self) -> None:
        """Take over as the active controller (the epoch is already in the context)."""
        ctx = self.context
        self.watches.register_failover_watches()
        log_dir_events = self.zk.get_log_dir_event_notifications()
        if log_dir_events:
            self.zk.delete_log_dir_event_notifications(
                log_dir_events, controller_epoch_zk_version=ctx.epoch_zk_version
            )
        notifications = self.zk.get_isr_change_notifications()
        if notifications:
            self.zk.delete_isr_change_notifications(
                notifications, controller_epoch_zk_version=ctx.epoch_zk_version
            )
        self._initialize_controller_context()
        to_delete, ineligible = self._fetch_topic_deletions_in_progress()
        self.topic_deletion_manager.init(to_delete, ineligible)
        self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, [])
        self.replica_state_machine.startup()
        self.partition_state_machine.startup()
        self.reassignment_manager.initialize_partition_reassignments()
        _log.info("ready to serve as the controller with epoch %s", ctx.epoch)
        self.topic_deletion_manager.resume_deletions()
        pending = self.zk.get_preferred_replica_election()
        if pending:
            self.replica_election_manager.elect_preferred_replicas_from_znode(pending)
        if self.config.auto_leader_rebalance_enable:
            self._rebalance_task = RepeatingTask(
                f"controller-{self.broker_id}-auto-leader-rebalance",
                self._auto_rebalance_initial_delay_s,
                float(self.config.leader_imbalance_check_interval_seconds),
                lambda: self.event_manager.put(AutoPreferredReplicaLeaderElection()),
            )
            self._rebalance_task.start()

    def _initialize_controller_context(self) -> None:
        """Load brokers, topics, assignments and partition states into the context.

        Kafka's ``initializeControllerContext``; also connects to the live brokers.
        """
        ctx = self.context
        ctx.set_live_brokers(self.zk.get_live_brokers().values())
        topics = self.zk.get_all_topics()
        ctx.set_all_topics(topics)
        self.watches.watch_topics(sorted(topics))
        for topic, assignment in self.zk.get_replica_assignments(topics).items():
            ctx.set_topic_assignment(topic, assignment.partitions)
            self._set_topic_id(assignment)
        ctx.partitions_being_reassigned = {
            tp
            for tp in ctx.all_partitions()
            if (a := ctx.partition_full_replica_assignment(tp)) is not None
            and a.is_being_reassigned
        }
        ctx.shutting_down_broker_ids.clear()
        self.watches.watch_brokers(sorted(ctx.live_or_shutting_down_broker_ids))
        for tp, state in self.zk.get_partition_states(ctx.all_partitions()).items():
            ctx.put_partition_leadership(tp, state)
        self.channel_manager = self._new_channel_manager()
        self.channel_manager.startup(ctx.live_or_shutting_down_brokers)

    def _new_channel_manager(self) -> ControllerChannelManager:
        kwargs: dict[str, Any] = {"retry_backoff_ms": self._channel_retry_backoff_ms}
        if self._connection_factory is not None:
            kwargs["connection_factory"] = self._connection_factory
        return ControllerChannelManager(
            self.broker_id,
            self.config.inter_broker_listener,
            self.config.controller_socket_timeout_ms,
            **kwargs,
        )

    def _fetch_topic_deletions_in_progress(self) -> tuple[set[str], set[str]]:
        """Return (topics queued for deletion, topics that cannot be deleted now)."""
        ctx = self.context
        queued = self.zk.get_topics_marked_for_deletion()
        with_offline_replicas = {
            topic
            for topic in ctx.all_topics
            if any(
                not ctx.is_replica_online(r.replica, r.topic_partition)
                for r in ctx.replicas_for_topic(topic)
            )
        }
        reassigning = {tp.topic for tp in ctx.partitions_being_reassigned}
        return queued, with_offline_replicas | reassigning

    def _on_controller_resignation(self) -> None:
        """Drop everything of the active role (Kafka's ``onControllerResignation``)."""
        self.watches.cancel_all()
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None
        self.partition_state_machine.shutdown()
        self.replica_state_machine.shutdown()
        if self.channel_manager is not None:
            self.channel_manager.shutdown()
            self.channel_manager = None
        self.batch.clear()
        self.context.reset()
        _log.info("broker %s is not the controller", self.broker_id)

    # --- broker events --------------------------------------------------------------------

    def _process_broker_change(self) -> None:
        """Compare ``/brokers/ids`` with the context and handle new, bounced and dead brokers."""
        if not self.is_active:
            return
        current = self.zk.get_live_brokers()
        known = self.context.live_broker_epochs
        new_ids = sorted(set(current) - set(known))
        dead_ids = sorted(set(known) - set(current))
        bounced_ids = sorted(i for i in set(current) & set(known) if current[i].epoch > known[i])
        _log.info(
            "broker change: new %s, dead %s, bounced %s, live %s",
            new_ids,
            dead_ids,
            bounced_ids,
            sorted(current),
        )
        channel = self.channel_manager
        if channel is not None:
            for broker_id in new_ids:
                channel.add_broker(current[broker_id])
            for broker_id in bounced_ids:
                channel.remove_broker(broker_id)
                channel.add_broker(current[broker_id])
            for broker_id in dead_ids:
                channel.remove_broker(broker_id)
        if new_ids:
            self.context.add_live_brokers(current[i] for i in new_ids)
            self._on_broker_startup(new_ids)
        if bounced_ids:
            self.context.remove_live_brokers(bounced_ids)
            self._on_broker_failure(bounced_ids)
            self.context.add_live_brokers(current[i] for i in bounced_ids)
            self._on_broker_startup(bounced_ids)
        if dead_ids:
            self.context.remove_live_brokers(dead_ids)
            self._on_broker_failure(dead_ids)

    def _on_broker_startup(self, broker_ids: list[int]) -> None:
        """Bring brokers that (re)started into the cluster (Kafka's ``onBrokerStartup``).

        A restarted broker's log dirs are online again: its offline replicas are forgotten.
        """
        ctx = self.context
        for broker_id in broker_ids:
            ctx.replicas_on_offline_dirs.pop(broker_id, None)
        existing = ctx.live_or_shutting_down_broker_ids - set(broker_ids)
        self.send_update_metadata_request(existing, [])
        with_leaders = {
            tp
            for tp in ctx.all_partitions()
            if ctx.partition_leadership(tp) is not None
            and not self.topic_deletion_manager.is_topic_queued_up_for_deletion(tp.topic)
        }
        self.send_update_metadata_request(broker_ids, with_leaders)
        replicas = ctx.replicas_on_brokers(set(broker_ids))
        self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE_REPLICA)
        self.partition_state_machine.trigger_online_partition_state_change()
        started = set(broker_ids)
        self.reassignment_manager.maybe_resume_reassignments(
            lambda _, assignment: any(r in started for r in assignment.target_replicas)
        )
        to_resume = {
            r.topic
            for r in replicas
            if self.topic_deletion_manager.is_topic_queued_up_for_deletion(r.topic)
        }
        if to_resume:
            self.topic_deletion_manager.resume_deletion_for_topics(to_resume)
        self.watches.watch_brokers(broker_ids)

    def _on_broker_failure(self, broker_ids: list[int]) -> None:
        """Handle dead brokers: elect new leaders, shrink ISRs (Kafka's ``onBrokerFailure``)."""
        for broker_id in broker_ids:
            self.context.replicas_on_offline_dirs.pop(broker_id, None)
        self._on_replicas_become_offline(self.context.replicas_on_brokers(set(broker_ids)))
        self.watches.unwatch_brokers(broker_ids)

    def _on_replicas_become_offline(self, replicas: set[PartitionAndReplica]) -> None:
        """Move leaderless partitions offline and elect, then take the replicas offline."""
        ctx = self.context
        deleting = self.topic_deletion_manager.is_topic_queued_up_for_deletion
        for_deletion = {r for r in replicas if deleting(r.topic)}
        not_for_deletion = replicas - for_deletion
        offline_leader = {
            tp
            for tp in ctx.all_partitions()
            if not deleting(tp.topic)
            and (leader := ctx.partition_leader(tp)) is not None
            and not ctx.is_replica_online(leader, tp)
        }
        self.partition_state_machine.handle_state_changes(
            offline_leader, PartitionState.OFFLINE_PARTITION
        )
        self.partition_state_machine.trigger_online_partition_state_change()
        self.replica_state_machine.handle_state_changes(
            not_for_deletion, ReplicaState.OFFLINE_REPLICA
        )
        if for_deletion:
            self.topic_deletion_manager.fail_replica_deletion(for_deletion)
        if not offline_leader:
            self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, [])

    def _process_broker_modifications(self, broker_id: int) -> None:
        """Cache a changed broker registration and tell every broker about it."""
        if not self.is_active:
            return
        new = self.zk.get_broker(broker_id)
        old = self.context.live_broker(broker_id)
        if new is None or old is None or (new.endpoints, new.rack) == (old.endpoints, old.rack):
            return
        _log.info("broker %s changed its registration: %s", broker_id, new)
        self.context.add_live_brokers([new])
        if self.channel_manager is not None:
            self.channel_manager.remove_broker(broker_id)
            self.channel_manager.add_broker(new)
        self.send_update_metadata_request(self.context.live_or_shutting_down_broker_ids, [])

    def _process_controlled_shutdown(self, event: ControlledShutdown) -> None:
        """Answer a ControlledShutdown event with the partitions the broker still leads."""
        remaining = self._do_controlled_shutdown(event.broker_id, event.broker_epoch)
        if not event.result.done():
            event.result.set_result(remaining)

    def _do_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> set[TopicPartition]:
        """Move leadership away from ``broker_id`` and take it out of the ISRs.

        Args:
            broker_id: the broker shutting down.
            broker_epoch: its epoch from the request; -1 is not checked (requests < v2).

        Returns:
            the partitions (with more than one replica) it still leads.

        Raises:
            NotControllerError: this broker is not the controller.
            StaleBrokerEpochError: the epoch is older than the registered one.
            BrokerNotAvailableError: the broker is not registered.
            ControllerMovedError: a ZooKeeper write was fenced.
        """
        if not self.is_active:
            raise NotControllerError("controller moved to another broker")
        ctx = self.context
        cached = ctx.broker_epoch(broker_id)
        if broker_epoch != UNKNOWN_BROKER_EPOCH and cached is not None and broker_epoch < cached:
            raise StaleBrokerEpochError(
                f"broker {broker_id} epoch {broker_epoch} is older than {cached}"
            )
        if broker_id not in ctx.live_or_shutting_down_broker_ids:
            raise BrokerNotAvailableError(f"broker {broker_id} is not registered")
        _log.info("controlled shutdown of broker %s", broker_id)
        ctx.shutting_down_broker_ids.add(broker_id)
        deleting = self.topic_deletion_manager.is_topic_queued_up_for_deletion
        to_act_on = {
            tp
            for tp in ctx.partitions_on_broker(broker_id)
            if len(ctx.partition_replica_assignment(tp)) > 1
            and ctx.partition_leadership(tp) is not None
            and not deleting(tp.topic)
        }
        led = {tp for tp in to_act_on if ctx.partition_leader(tp) == broker_id}
        followed = to_act_on - led
        self.partition_state_machine.handle_state_changes(
            led, PartitionState.ONLINE_PARTITION, ControlledShutdownPartitionLeaderElection()
        )
        self.replica_state_machine.handle_state_changes(
            {PartitionAndReplica(tp, broker_id) for tp in followed}, ReplicaState.OFFLINE_REPLICA
        )
        return {
            tp
            for tp in ctx.partitions_led_by(broker_id)
            if not deleting(tp.topic) and len(ctx.partition_replica_assignment(tp)) > 1
        }

    # --- topic events ---------------------------------------------------------------------

    def _process_topic_change(self) -> None:
        """Create the partitions of new topics; forget topics that vanished."""
        if not self.is_active:
            return
        ctx = self.context
        topics = self.zk.get_all_topics()
        new_topics = topics - ctx.all_topics
        deleted_topics = ctx.all_topics - topics
        ctx.set_all_topics(topics)
        self.watches.watch_topics(sorted(new_topics))
        assignments = self.zk.get_replica_assignments(new_topics)
        for topic in deleted_topics:
            self.watches.unwatch_topic(topic)
            ctx.remove_topic(topic)
        added: set[TopicPartition] = set()
        for topic, assignment in assignments.items():
            ctx.set_topic_assignment(topic, assignment.partitions)
            self._set_topic_id(assignment)
            added |= ctx.partitions_for_topic(topic)
        _log.info("topic change: new %s, deleted %s", sorted(new_topics), sorted(deleted_topics))
        if added:
            self._on_new_partition_creation(added)

    def _set_topic_id(self, assignment: TopicAssignment) -> None:
        """Record a topic's id; give one to a topic created without (KIP-516).

        Kafka's ``KafkaController.setTopicIds``: topics written by Kafka before 2.8 (or by
        an older admin tool) get a new id in their ``/brokers/topics/<topic>`` znode,
        written with the controller's fence; a write that loses a race is retried on the
        next topic change (the id is then read back).
        """
        topic_id = assignment.topic_id
        if topic_id is None:
            topic_id = new_topic_id()
            written = self.zk.set_replica_assignment(
                assignment.topic,
                assignment.partitions,
                assignment.zk_version,
                topic_id=topic_id,
                controller_epoch_zk_version=self.context.epoch_zk_version,
            )
            if written is None:
                _log.warning("topic %s: could not store its new topic id", assignment.topic)
                return
            _log.info("topic %s: assigned topic id %s", assignment.topic, topic_id)
        self.context.topic_ids[assignment.topic] = topic_id

    def _process_partition_modifications(self, topic: str) -> None:
        """Create partitions added to ``topic``'s assignment."""
        if not self.is_active:
            return
        ctx = self.context
        assignment = self.zk.get_replica_assignments([topic]).get(topic)
        if assignment is None:
            return
        to_add = {
            TopicPartition(topic, p): a
            for p, a in assignment.partitions.items()
            if not ctx.partition_replica_assignment(TopicPartition(topic, p))
        }
        if not to_add:
            return
        if self.topic_deletion_manager.is_topic_queued_up_for_deletion(topic):
            _log.warning(
                "not adding partitions %s of %s: it is being deleted", sorted(to_add), topic
            )
            return
        _log.info("new partitions %s", sorted(str(tp) for tp in to_add))
        for tp, replicas in to_add.items():
            ctx.update_partition_full_replica_assignment(tp, replicas)
        self._on_new_partition_creation(set(to_add))

    def _on_new_partition_creation(self, partitions: set[TopicPartition]) -> None:
        """Move new partitions and their replicas through New to Online.

        Kafka's ``onNewPartitionCreation`` (topic creation, partitions added).
        """
        replicas = self.context.replicas_for_partitions(partitions)
        self.partition_state_machine.handle_state_changes(partitions, PartitionState.NEW_PARTITION)
        self.replica_state_machine.handle_state_changes(replicas, ReplicaState.NEW_REPLICA)
        self.partition_state_machine.handle_state_changes(
            partitions, PartitionState.ONLINE_PARTITION, OfflinePartitionLeaderElection()
        )
        self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE_REPLICA)

    def _process_topic_deletion(self) -> None:
        """Queue the topics of ``/admin/delete_topics`` for deletion."""
        if not self.is_active:
            return
        ctx = self.context
        fence = ctx.epoch_zk_version
        requested = self.zk.get_topics_marked_for_deletion()
        unknown = requested - ctx.all_topics
        if unknown:
            _log.warning("ignoring deletion of unknown topics %s", sorted(unknown))
            self.zk.remove_topic_deletion_markers(unknown, controller_epoch_zk_version=fence)
        to_delete = requested - unknown
        if not to_delete:
            return
        if not self.topic_deletion_manager.delete_topic_enable:
            _log.info(
                "removing deletion markers of %s: delete.topic.enable is false", sorted(to_delete)
            )
            self.zk.remove_topic_deletion_markers(to_delete, controller_epoch_zk_version=fence)
            return
        _log.info("starting deletion of topics %s", sorted(to_delete))
        reassigning = {tp.topic for tp in ctx.partitions_being_reassigned} & to_delete
        self.topic_deletion_manager.mark_topic_ineligible_for_deletion(
            reassigning, "reassignment in progress"
        )
        self.topic_deletion_manager.enqueue_topics_for_deletion(to_delete)

    def _on_stop_replica_response(
        self, broker_id: int, response: Any, deleted: frozenset[TopicPartition]
    ) -> None:
        """Turn a StopReplica response of a deletion into an event (channel thread).

        Only the partitions the request asked to delete are reported.
        """
        errors: dict[TopicPartition, int] = {}
        for entry in response.partition_errors:
            tp = TopicPartition(entry.topic_name, entry.partition_index)
            if tp in deleted:
                errors[tp] = entry.error_code
        if response.error_code != _NONE:
            errors = dict.fromkeys(deleted, response.error_code)
        self.event_manager.put(
            TopicDeletionStopReplicaResponseReceived(broker_id, response.error_code, errors)
        )

    def _process_topic_deletion_stop_replica_response(
        self, event: TopicDeletionStopReplicaResponseReceived
    ) -> None:
        """Mark the replicas deleted, or failed (to be retried)."""
        if not self.is_active:
            return
        if event.request_error != _NONE:
            in_error = set(event.partition_errors)
        else:
            in_error = {tp for tp, code in event.partition_errors.items() if code != _NONE}
        manager = self.topic_deletion_manager
        manager.fail_replica_deletion(_replicas(in_error, event.replica_id))
        deleted = set(event.partition_errors) - in_error
        if deleted:
            manager.complete_replica_deletion(_replicas(deleted, event.replica_id))

    def _process_alter_partition(self, event: AlterPartitionReceived) -> None:
        """Answer an AlterPartition event (Kafka's ``processAlterPartition``, ZooKeeper mode).

        Raises:
            NotControllerError: this broker is not the controller.
            StaleBrokerEpochError: the leader is not registered under the request's epoch.
            ControllerMovedError: a ZooKeeper write was fenced.
        """
        if not self.is_active:
            raise NotControllerError("controller moved to another broker")
        ctx = self.context
        registered = ctx.broker_epoch(event.broker_id)
        if registered is None or registered != event.broker_epoch:
            raise StaleBrokerEpochError(
                f"AlterPartition of broker {event.broker_id} under epoch {event.broker_epoch};"
                f" registered: {registered}"
            )
        proposals = dict(event.proposals)
        names = {topic_id: topic for topic, topic_id in ctx.topic_ids.items()}
        unknown_ids: dict[str, list[int]] = {}
        for topic_id, partitions in event.proposals_by_topic_id.items():
            topic = names.get(topic_id)
            if topic is None:
                unknown_ids[topic_id] = sorted(partitions)
                continue
            for index, proposed in partitions.items():
                proposals[TopicPartition(topic, index)] = proposed
        current = {}
        for tp in proposals:
            leadership = ctx.partition_leadership(tp)
            if leadership is not None:
                current[tp] = leadership.leader_and_isr
        decision = decide_alter_partition(
            event.broker_id,
            proposals,
            current,
            ctx.live_broker_epochs,
            ctx.shutting_down_broker_ids,
            event.request_version,
        )
        outcome: dict[TopicPartition, int | LeaderAndIsr] = {
            **decision.errors,
            **decision.unchanged,
        }
        if decision.accepted:
            written = self.zk.update_leader_and_isr(
                decision.accepted, ctx.epoch, controller_epoch_zk_version=ctx.epoch_zk_version
            )
            for tp, state in written.written.items():
                ctx.put_partition_leadership(tp, LeaderIsrAndControllerEpoch(state, ctx.epoch))
                outcome[tp] = state
            for tp in written.version_conflicts:
                outcome[tp] = INVALID_UPDATE_VERSION
            for tp in written.missing:
                outcome[tp] = UNKNOWN_TOPIC_OR_PARTITION
            _log.debug(
                "AlterPartition of broker %d: %d ISRs written",
                event.broker_id,
                len(written.written),
            )
        known = set(proposals) & set(current)
        if known:
            self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, known)
        result = AlterPartitionResult(
            outcome, {tp.topic: ctx.topic_ids.get(tp.topic) for tp in outcome}, unknown_ids
        )
        if not event.result.done():
            event.result.set_result(result)
        # As Kafka, after answering: a reassignment completes once its targets joined the ISR.
        reassigned = [
            tp
            for tp, state in outcome.items()
            if not isinstance(state, int) and tp in ctx.partitions_being_reassigned
        ]
        if reassigned:
            self.reassignment_manager.on_partition_isr_changes(reassigned)

    def _process_isr_change_notification(self) -> None:
        """Re-read the states of partitions whose ISR changed and send them to every broker."""
        if not self.is_active:
            return
        ctx = self.context
        names = self.zk.get_isr_change_notifications()
        if not names:
            return
        try:
            notified = self.zk.get_isr_change_notification_partitions(names)
            known = notified & ctx.all_partitions()
            if known:
                for tp, state in self.zk.get_partition_states(known).items():
                    ctx.put_partition_leadership(tp, state)
                self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, known)
        finally:
            self.zk.delete_isr_change_notifications(
                names, controller_epoch_zk_version=ctx.epoch_zk_version
            )

    # --- log dir failures -----------------------------------------------------------------

    def _process_log_dir_event_notification(self) -> None:
        """Ask the brokers whose log dir failed which of their replicas are still online.

        Kafka's ``processLogDirEventNotification`` / ``onBrokerLogDirFailure``: every replica
        of those brokers goes OnlineReplica again, which sends them LeaderAndIsr; the
        replicas in an offline dir answer KAFKA_STORAGE_ERROR (see
        :meth:`_process_leader_and_isr_response`). The notifications are deleted.
        """
        if not self.is_active:
            return
        names = self.zk.get_log_dir_event_notifications()
        if not names:
            return
        try:
            broker_ids = self.zk.get_broker_ids_from_log_dir_events(names)
            _log.info("handling log dir failure of brokers %s", sorted(set(broker_ids)))
            replicas = self.context.replicas_on_brokers(set(broker_ids))
            self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE_REPLICA)
        finally:
            self.zk.delete_log_dir_event_notifications(
                names, controller_epoch_zk_version=self.context.epoch_zk_version
            )

    def _on_leader_and_isr_response(self, broker_id: int, response: Any) -> None:
        """Turn a LeaderAndIsr response into an event (channel thread)."""
        errors = {
            TopicPartition(entry.topic_name, entry.partition_index): entry.error_code
            for entry in response.partition_errors or ()
        }
        self.event_manager.put(LeaderAndIsrResponseReceived(broker_id, response.error_code, errors))

    def _process_leader_and_isr_response(self, event: LeaderAndIsrResponseReceived) -> None:
        """Mark the replicas a broker reports in offline log dirs as offline.

        Kafka's ``processLeaderAndIsrResponseReceived``: KAFKA_STORAGE_ERROR partitions
        join the broker's offline replicas, error-free ones leave them; the newly
        offline replicas go OfflineReplica, their partitions electing another leader from
        the rest of the ISR (``onReplicasBecomeOffline``).
        """
        if not self.is_active:
            return
        if event.error_code != _NONE:
            _log.error(
                "LeaderAndIsr response of broker %d: error %d", event.broker_id, event.error_code
            )
            return
        ctx = self.context
        if event.broker_id not in ctx.live_or_shutting_down_broker_ids:
            return
        offline = {tp for tp, code in event.partition_errors.items() if code == _STORAGE_ERROR}
        online = {tp for tp, code in event.partition_errors.items() if code == _NONE}
        previous = ctx.replicas_on_offline_dirs.get(event.broker_id, set())
        current = (previous - online) | offline
        ctx.replicas_on_offline_dirs[event.broker_id] = current
        new_offline = {tp for tp in current - previous if tp in ctx.all_partitions()}
        if new_offline:
            _log.info(
                "marking replicas %s of broker %d offline (offline log dir)",
                sorted(str(tp) for tp in new_offline),
                event.broker_id,
            )
            self._on_replicas_become_offline(_replicas(new_offline, event.broker_id))

    # --- reassignment events (KIP-455) ----------------------------------------------------

    def _process_alter_partition_reassignments(self, event: AlterPartitionReassignments) -> None:
        """Answer an AlterPartitionReassignments event: partition -> (error code, message).

        Raises:
            NotControllerError: this broker is not the controller.
        """
        if not self.is_active:
            raise NotControllerError("controller moved to another broker")
        results = self.reassignment_manager.alter_partition_reassignments(event.reassignments)
        if not event.result.done():
            event.result.set_result(results)

    def _process_list_partition_reassignments(self, event: ListPartitionReassignments) -> None:
        """Answer a ListPartitionReassignments event with the running reassignments.

        Raises:
            NotControllerError: this broker is not the controller.
        """
        if not self.is_active:
            raise NotControllerError("controller moved to another broker")
        listed = self.reassignment_manager.list_partition_reassignments(event.partitions)
        if not event.result.done():
            event.result.set_result(listed)

    def _process_zk_partition_reassignment(self) -> None:
        """Start the reassignments listed in ``/admin/reassign_partitions``."""
        if self.is_active:
            self.reassignment_manager.start_zk_partition_reassignments()

    def _process_partition_reassignment_isr_changes(self, tps: list[TopicPartition]) -> None:
        """Complete the reassignments of ``tps`` whose target replicas all joined the ISR.

        ``tps`` are the partitions of this event and of those of its kind queued after
        it, handled as one batch.
        """
        if self.is_active:
            self.reassignment_manager.on_partition_isr_changes(tps)

    # --- election events ------------------------------------------------------------------

    def _process_elect_leaders(self, event: ElectLeaders) -> None:
        """Answer an ElectLeaders event: partition -> (error code, message).

        Raises:
            NotControllerError: this broker is not the controller (the future fails too).
        """
        if not self.is_active:
            raise NotControllerError("controller moved to another broker")
        results = self.replica_election_manager.elect_leaders(event.partitions, event.election_type)
        if not event.result.done():
            event.result.set_result(results)

    def _process_preferred_replica_election_znode(self) -> None:
        """Run the preferred elections listed in ``/admin/preferred_replica_election``."""
        if self.is_active:
            self.replica_election_manager.elect_preferred_replicas_from_znode(
                self.zk.get_preferred_replica_election()
            )

    def _process_auto_preferred_replica_leader_election(self) -> None:
        """Rebalance leaders if a broker's imbalance exceeds the configured percentage."""
        if self.is_active:
            self.replica_election_manager.check_and_trigger_auto_leader_rebalance()


def _replicas(partitions: Iterable[TopicPartition], replica_id: int) -> set[PartitionAndReplica]:
    return {PartitionAndReplica(tp, replica_id) for tp in partitions}
