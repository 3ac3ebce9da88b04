"""The broker process: wires the log manager, ZooKeeper, replica manager, controller and listeners.

Start-up follows Kafka's ``KafkaServer.startup``: load logs (recovering torn tails),
connect to ZooKeeper, read the cluster id, the topic configs and the dynamic
replication throttle rates (``/config/brokers/<id>`` over ``/config/brokers/<default>``
over ``server.properties``, KIP-73/KIP-226), bind the listeners,
register ``/brokers/ids/<id>`` (its czxid is the broker epoch, KIP-380), start the
controller component (which competes for ``/controller``), then the periodic tasks
(ISR shrink, ISR change propagation, HW checkpoint, log retention, and the
registration again after each ZooKeeper session expiry, with a new broker epoch) and, when
``metrics.port`` is set, the Prometheus endpoint (``docs/reference/metrics.md``). Shutdown first
asks the controller to move leadership away (controlled shutdown, when
``controlled.shutdown.enable``), then stops everything and checkpoints.

A log dir that fails with an I/O error goes offline (``server.log_dir_failure``): its
replicas answer KAFKA_STORAGE_ERROR and the controller moves their leadership away; with
no log dir left the broker halts (exit 1), as Kafka does.

Listener security (TLS, SASL; :mod:`kpo_broker.security`) is resolved and its keys and
certificates loaded before anything else, so a listener that cannot be secured as
configured refuses start-up (:class:`~kpo_broker.config.ConfigError`). SCRAM credentials
are read from ``/config/users`` before the listeners open and followed through
``/config/changes``; the broker's own connections to other brokers use the inter-broker
listener's security.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from kpo_broker.cancellation import cancel_and_wait
from kpo_broker.config import BrokerConfig, ConfigError
from kpo_broker.coordinator.group.coordinator import GroupConfig, GroupCoordinator
from kpo_broker.coordinator.group.metadata_manager import GroupMetadataManager, OffsetConfig
from kpo_broker.coordinator.group.records import GROUP_METADATA_TOPIC_NAME
from kpo_broker.log.broker_metadata import checkpoint_broker_metadata
from kpo_broker.log.errors import LogError
from kpo_broker.log.log_cleaner import CleanerConfig, LogCleaner
from kpo_broker.log.manager import LogManager
from kpo_broker.protocol.client import BrokerClient, StreamConnector
from kpo_broker.security.acl_store import AclStore
from kpo_broker.security.authorizer import AclAuthorizer
from kpo_broker.security.channel import AUTHENTICATION_TIMEOUT_S, ListenerAuthenticator
from kpo_broker.security.client import connector_for
from kpo_broker.security.config import (
    AuthorizerSettings,
    inter_broker_client_security,
    resolve_authorizer,
    resolve_listener_security,
)
from kpo_broker.security.credentials import CredentialCache, desanitize
from kpo_broker.security.tls import TlsConfigError
from kpo_broker.server import kafka_apis
from kpo_broker.server.alter_partition_manager import AlterPartitionManager
from kpo_broker.server.apis import versions
from kpo_broker.server.auth_helper import AuthHelper
from kpo_broker.server.change_notifications import NotificationProcessor
from kpo_broker.server.components import BrokerComponents
from kpo_broker.server.config_admin import DEFAULT_BROKER_ENTITY
from kpo_broker.server.controlled_shutdown import request_controlled_shutdown
from kpo_broker.server.dynamic_broker_config import DynamicBrokerConfig
from kpo_broker.server.dynamic_config import TopicConfigs
from kpo_broker.server.fetch_session import new_fetch_manager
from kpo_broker.server.fetcher import FetcherSettings, ReplicaFetcherManager
from kpo_broker.server.log_dir_failure import LogDirFailureHandler
from kpo_broker.server.log_dir_mover import LogDirMover, zk_rate_reader
from kpo_broker.server.metadata_cache import MetadataCache
from kpo_broker.server.metrics import AuthenticationStats, RequestStats
from kpo_broker.server.metrics_http import MetricsHttpServer, broker_state, new_registry
from kpo_broker.server.offsets_topic import OffsetsTopicCreator
from kpo_broker.server.producer_ids import ProducerIdManager
from kpo_broker.server.replica_manager import ReplicaManager, now_ms
from kpo_broker.server.replication_quota import (
    ReplicationQuotaManager,
    ReplicationQuotas,
    effective_throttle_rates,
)
from kpo_broker.server.socket_server import Listener, SocketServer
from kpo_broker.server.topic_admin import TopicAdmin
from kpo_broker.zk.client import KafkaZkClient
from kpo_broker.zk.errors import BrokerIdAlreadyRegisteredError, ZkConnectionLossError
from kpo_broker.zk.model import BrokerRegistration, EndPoint
from kpo_broker.zk.security import resolve_zk_client_security
from kpo_broker.zk.session import ZkSessionState
from kpo_kafka.topic_partition import TopicPartition

log = logging.getLogger(__name__)

#: Longest pause between two ``flush.ms`` checks, ms (``log.flush.scheduler.interval.ms``
#: defaults to Long.MAX, i.e. never, in Kafka; a topic's ``flush.ms`` still applies here).
FLUSH_CHECK_MAX_INTERVAL_MS = 1000

#: How often the ``kafka-delete-logs`` task looks for deleted logs whose delete delay ran
#: out, s (Kafka reschedules the task for the next deadline; a 1 s check is as prompt).
DELETE_LOGS_CHECK_S = 1.0

#: Pause between two attempts to register again after a ZooKeeper session expiry, s.
REGISTRATION_RETRY_BACKOFF_S = 0.5


class KafkaServer:
    """One broker.

    Args:
        config: the broker configuration.
    """

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.components: BrokerComponents | None = None
        self.log_dir_failure_handler: LogDirFailureHandler | None = None
        self.socket_server: SocketServer | None = None
        self.alter_partition_manager: AlterPartitionManager | None = None
        self.zk: KafkaZkClient | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._config_watch: object | None = None
        self._last_config_change = -1
        self._broker_configs_changed = False
        self._notification_processors: list[NotificationProcessor] = []
        self.shutdown_requested = asyncio.Event()
        self.request_stats = RequestStats()
        self.authentication_stats = AuthenticationStats()
        self.credentials = CredentialCache()
        self._connector: StreamConnector | None = None
        self.metrics_server: MetricsHttpServer | None = None
        self._new_session = asyncio.Event()
        self.dynamic_config: DynamicBrokerConfig | None = None
        self.authorizer: AclAuthorizer | None = None

    def _security(
        self, supported: dict[int, tuple[int, int]]
    ) -> tuple[dict[str, ListenerAuthenticator], StreamConnector]:
        """Resolve every listener's security and the inter-broker client's; load TLS files.

        Raises:
            ConfigError: anything that cannot be applied as configured (names the property).
        """
        c = self.config
        listeners = resolve_listener_security(c)
        client = inter_broker_client_security(c, listeners)
        timeout_s = AUTHENTICATION_TIMEOUT_S
        if c.connections_max_idle_ms >= 0:
            timeout_s = min(timeout_s, c.connections_max_idle_ms / 1000)
        try:
            authenticators = {
                name: ListenerAuthenticator(security, supported, self.credentials.get, timeout_s)
                for name, security in listeners.items()
            }
            connector = connector_for(client)
        except TlsConfigError as exc:
            raise ConfigError(exc.property_name, str(exc).split(": ", 1)[-1]) from None
        for name, security in listeners.items():
            mechanisms = security.sasl.enabled_mechanisms if security.sasl else ()
            log.info(
                "listener %s: %s%s%s",
                name,
                security.protocol,
                f", ssl.client.auth={security.ssl.client_auth}" if security.ssl else "",
                f", SASL {','.join(mechanisms)}" if mechanisms else "",
            )
        return authenticators, connector

    def _load_credentials(self) -> None:
        """Read every user's SCRAM credentials from ``/config/users``."""
        assert self.zk is not None
        names = self.zk.get_entity_names("users")
        configs = self.zk.get_entity_configs("users", names)
        for name in names:
            self.credentials.update_user(desanitize(name), configs[name].config)
        log.info(
            "broker %d: SCRAM credentials of %d users",
            self.broker_id,
            len(self.credentials.users()),
        )

    async def startup(self) -> None:
        """Start every component; raise if any fails (the caller exits non-zero).

        Raises:
            ConfigError: a listener's security cannot be applied (before any other work).
        """
        c = self.config
        supported = {**versions.CLIENT_APIS, **versions.INTER_BROKER_APIS}
        authenticators, connector = self._security(supported)
        authorizer_settings = resolve_authorizer(c)
        self._connector = connector
        zk_security = resolve_zk_client_security(c.extra)
        log.info("ZooKeeper client: %s", zk_security.summary())
        log_dirs = [Path(d) for d in (c.log_dirs or [c.log_dir])]
        quotas = self._new_replication_quotas()
        zk = KafkaZkClient(
            c.zookeeper_connect,
            session_timeout_ms=c.zookeeper_session_timeout_ms,
            connection_timeout_ms=c.zookeeper_connection_timeout_ms,
            max_in_flight_requests=c.zookeeper_max_in_flight_requests,
            security=zk_security,
        )
        self.zk = zk
        await asyncio.to_thread(zk.connect)
        cluster_id = await asyncio.to_thread(zk.get_or_create_cluster_id, _new_cluster_id())
        # meta.properties before the logs are loaded: never touch another broker's data.
        await asyncio.to_thread(checkpoint_broker_metadata, log_dirs, self.broker_id, cluster_id)
        # Dynamic broker configs and topic overrides before the logs load, so each log opens
        # with its topic's effective config (Kafka's KafkaServer.startup order).
        own, default = await asyncio.to_thread(self._read_dynamic_broker_configs)
        dynamic = DynamicBrokerConfig(c, own, default)
        self.dynamic_config = dynamic
        topic_configs = TopicConfigs(dynamic.effective)
        topic_configs.add_listener(quotas.apply_topic_config)
        await asyncio.to_thread(self._load_topic_configs, topic_configs)
        log_manager = LogManager(
            log_dirs, topic_configs.default_log_config(), topic_configs.log_config
        )
        await asyncio.to_thread(log_manager.startup)
        topic_configs.add_listener(_log_config_applier(topic_configs, log_manager))
        await asyncio.to_thread(self._load_throttle_rates, quotas)
        await asyncio.to_thread(self._load_credentials)
        metadata_cache = MetadataCache(cluster_id=cluster_id)
        self.alter_partition_manager = AlterPartitionManager(
            self.broker_id,
            lambda: self.components.broker_epoch if self.components is not None else -1,
            lambda: metadata_cache.controller_endpoint(c.inter_broker_listener),
            connector=connector,
            request_timeout_ms=c.controller_socket_timeout_ms,
        )
        replica_manager = ReplicaManager(
            self.broker_id,
            log_manager,
            self.alter_partition_manager,
            c.replica_lag_time_max_ms,
            topic_configs.log_config,
            known_partition=lambda tp: metadata_cache.partition(tp[0], tp[1]) is not None,
        )
        log_manager.attach_cleaner(_new_log_cleaner(c, log_dirs, log_manager, replica_manager))
        fetchers = ReplicaFetcherManager(
            self.broker_id,
            replica_manager,
            FetcherSettings(
                max_wait_ms=c.replica_fetch_wait_max_ms,
                min_bytes=c.replica_fetch_min_bytes,
                max_bytes=c.replica_fetch_max_bytes,
                response_max_bytes=c.replica_fetch_response_max_bytes,
                backoff_ms=c.replica_fetch_backoff_ms,
                request_timeout_ms=c.replica_socket_timeout_ms,
                connector=connector,
            ),
            c.num_replica_fetchers,
            quotas.follower,
        )
        topic_admin = TopicAdmin(
            zk,
            metadata_cache,
            c.num_partitions,
            c.default_replication_factor,
            c.delete_topic_enable,
        )
        components = BrokerComponents(
            config=c,
            broker_id=self.broker_id,
            broker_epoch=-1,
            log_manager=log_manager,
            replica_manager=replica_manager,
            metadata_cache=metadata_cache,
            zk=zk,
            topic_configs=topic_configs,
            topic_admin=topic_admin,
            fetchers=fetchers,
            controller=None,
            producer_ids=ProducerIdManager(self.broker_id, zk),
            supported_apis=supported,
            replication_quotas=quotas,
            log_dir_mover=LogDirMover(
                log_manager, replica_manager, zk_rate_reader(zk, self.broker_id)
            ),
            inter_broker_connector=connector,
            credentials=self.credentials,
            fetch_manager=new_fetch_manager(c.max_incremental_fetch_session_cache_slots),
        )
        self.log_dir_failure_handler = LogDirFailureHandler(
            self.broker_id,
            log_manager.failure_channel,
            replica_manager,
            log_manager,
            fetchers,
            zk.propagate_log_dir_event,
            on_partitions_offline=lambda tps: _resign_offline_coordinators(components, tps),
        )
        if authorizer_settings is not None:
            components.auth = await self._start_authorizer(zk, authorizer_settings)
        components.group_coordinator = await self._new_group_coordinator(components)
        self.log_dir_failure_handler.start()
        components.offsets_topic_creator = OffsetsTopicCreator(c, topic_admin)
        self.components = components
        apis = kafka_apis.KafkaApis(components, kafka_apis.HANDLERS)
        self.socket_server = SocketServer(
            [Listener(e.name, e.host, e.port, authenticators.get(e.name)) for e in c.listeners],
            apis.handle,
            supported,
            c.socket_request_max_bytes,
            request_observer=self.request_stats.record,
            queued_max_request_bytes=c.queued_max_request_bytes,
            connections_max_idle_ms=c.connections_max_idle_ms,
            max_connections_per_ip=dynamic.effective.max_connections_per_ip,
            max_connections_per_ip_overrides=dynamic.effective.max_connections_per_ip_overrides,
            authentication_stats=self.authentication_stats,
            failed_authentication_delay_ms=c.connection_failed_authentication_delay_ms,
        )
        # Bound now (the registration names the ports), processing once started (Kafka's
        # KafkaServer.startup): a client answered before this broker is registered and has
        # the cluster's metadata would be told of no brokers and no topics.
        bound = await self.socket_server.start(process_requests=False)
        registration = BrokerRegistration(
            id=self.broker_id,
            endpoints=tuple(
                EndPoint(
                    e.name,
                    e.host,
                    bound.get(e.name, e.port) if e.port == 0 else e.port,
                    e.security_protocol.name,
                )
                for e in c.advertised_listeners
            ),
            rack=c.broker_rack,
        )
        components.broker_epoch = await self._register(zk, registration)
        log.info("broker %d registered with epoch %d", self.broker_id, components.broker_epoch)
        zk.add_session_listener(self._on_session_state)
        components.controller = self._start_controller(components)
        if components.log_dir_mover is not None:
            components.log_dir_mover.start()
        if log_manager.cleaner is not None:
            log_manager.cleaner.startup()
        config_changes = self._start_notifications("config", self._apply_config_changes)
        self._config_watch = zk.watch_config_changes(
            lambda _event: config_changes.trigger_threadsafe()
        )
        self._tasks = [
            self._every(c.replica_lag_time_max_ms / 2000, self._shrink_isrs, "isr-shrink"),
            self._every(
                c.replica_high_watermark_checkpoint_interval_ms / 1000,
                self._checkpoint,
                "hw-checkpoint",
            ),
            self._every(c.log_retention_check_interval_ms / 1000, self._cleanup_logs, "retention"),
            self._every(DELETE_LOGS_CHECK_S, self._delete_logs, "delete-logs"),
            self._every(
                min(
                    c.log_flush_offset_checkpoint_interval_ms,
                    c.log_flush_start_offset_checkpoint_interval_ms,
                )
                / 1000,
                self._checkpoint_log_offsets,
                "log-offset-checkpoint",
            ),
            self._every(
                min(c.log_flush_scheduler_interval_ms, FLUSH_CHECK_MAX_INTERVAL_MS) / 1000,
                self._flush_dirty_logs,
                "log-flush",
            ),
            asyncio.create_task(
                self._keep_registered(zk, components, registration), name="broker-registration"
            ),
        ]
        if c.metrics_port:  # metrics.port; 0 = disabled
            registry = new_registry(
                lambda: broker_state(self.components),
                self.request_stats,
                self.authentication_stats,
                authorization_stats=self.authorizer.stats if self.authorizer else None,
            )
            self.metrics_server = MetricsHttpServer(registry, c.metrics_host, c.metrics_port)
            await self.metrics_server.start()
        self.socket_server.enable_request_processing()
        log.info("broker %d started, listening on %s", self.broker_id, bound)

    async def _start_authorizer(
        self, zk: KafkaZkClient, settings: AuthorizerSettings
    ) -> AuthHelper:
        """Load the ACLs from ZooKeeper and follow their change notifications (AclAuthorizer)."""
        self.authorizer = AclAuthorizer(
            settings.super_users, settings.allow_everyone_if_no_acl_found
        )
        store = AclStore(zk, self.authorizer)

        async def process() -> None:
            await asyncio.to_thread(store.process_notifications)

        acl_changes = self._start_notifications("ACL", process)
        await asyncio.to_thread(store.start, acl_changes.trigger_threadsafe)
        log.info(
            "broker %d: ACL authorizer on, %d super users, allow.everyone.if.no.acl.found=%s",
            self.broker_id,
            len(settings.super_users),
            str(settings.allow_everyone_if_no_acl_found).lower(),
        )
        return AuthHelper(self.authorizer, store)

    async def _new_group_coordinator(self, components: BrokerComponents) -> GroupCoordinator:
        """Build and start the group coordinator (Kafka's ``GroupCoordinator.startup``).

        The number of ``__consumer_offsets`` partitions is the topic's when it exists
        (read from ZooKeeper now, later from the metadata cache), else
        ``offsets.topic.num.partitions``.
        """
        assert self.zk is not None
        existing = await asyncio.to_thread(
            self.zk.get_replica_assignments, [GROUP_METADATA_TOPIC_NAME]
        )
        stored = existing.get(GROUP_METADATA_TOPIC_NAME)
        stored_count = len(stored.partitions) if stored is not None else None
        cache = components.metadata_cache

        def partition_count() -> int | None:
            known = cache.partitions.get(GROUP_METADATA_TOPIC_NAME)
            return len(known) if known else stored_count

        manager = GroupMetadataManager(
            self.broker_id,
            OffsetConfig.from_broker_config(self.config),
            components.replica_manager,
            components.topic_configs.min_insync_replicas,
            partition_count,
        )
        coordinator = GroupCoordinator(
            self.broker_id, GroupConfig.from_broker_config(self.config), manager
        )
        coordinator.startup()
        return coordinator

    async def _register(self, zk: KafkaZkClient, registration: BrokerRegistration) -> int:
        """Register ``/brokers/ids/<id>``, waiting out the session of a crashed predecessor.

        After a crash the old ephemeral znode lives until its ZooKeeper session expires
        (``zookeeper.session.timeout.ms``); Kafka fails start-up at once in that case,
        here the registration is retried until that timeout (plus a margin) has passed.

        Raises:
            BrokerIdAlreadyRegisteredError: another live broker holds this id.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.zookeeper_session_timeout_ms / 1000 + 5
        while True:
            try:
                return await asyncio.to_thread(zk.register_broker, registration)
            except BrokerIdAlreadyRegisteredError:
                if loop.time() >= deadline:
                    raise
                log.info("broker.id %d is still registered; retrying", self.broker_id)
                await asyncio.sleep(0.5)

    def _on_session_state(self, state: ZkSessionState) -> None:
        """Kazoo thread: a new ZooKeeper session needs this broker's registration again.

        Kafka's ``SessionExpireListener.handleNewSession``: the expired session took the
        ephemeral ``/brokers/ids/<id>`` with it, so until the broker registers again the
        controller counts it as dead (and moves its leaderships away).
        """
        if state is ZkSessionState.NEW_SESSION:
            self._loop.call_soon_threadsafe(self._new_session.set)

    async def _keep_registered(
        self, zk: KafkaZkClient, components: BrokerComponents, registration: BrokerRegistration
    ) -> None:
        """Register ``/brokers/ids/<id>`` again after each new ZooKeeper session.

        The new registration's czxid is the new broker epoch (KIP-380): the controller
        sees a new (or bounced) broker, sends it the current leaders and leader epochs,
        and this broker's stale leaderships end with that LeaderAndIsr. While the
        session keeps failing, or another session still holds the znode, the
        registration is retried every :data:`REGISTRATION_RETRY_BACKOFF_S`.
        """
        while True:
            await self._new_session.wait()
            self._new_session.clear()
            log.warning(
                "broker %d: new ZooKeeper session after an expiry; registering again",
                self.broker_id,
            )
            while True:
                try:
                    epoch = await asyncio.to_thread(zk.register_broker, registration)
                    break
                except (BrokerIdAlreadyRegisteredError, ZkConnectionLossError) as exc:
                    log.warning(
                        "broker %d: registration failed (%s); retrying", self.broker_id, exc
                    )
                    await asyncio.sleep(REGISTRATION_RETRY_BACKOFF_S)
            components.broker_epoch = epoch
            log.info("broker %d registered again with epoch %d", self.broker_id, epoch)
            # Kafka's ZkNodeChangeNotificationListener re-reads its notifications on a
            # new session: changes made while this broker was out are applied now.
            for processor in self._notification_processors:
                processor.trigger()

    def _start_controller(self, components: BrokerComponents) -> object:
        from kpo_broker.controller.controller import KafkaController

        connector = self._connector

        def connection(host: str, port: int, client_id: str, timeout_ms: int) -> BrokerClient:
            return BrokerClient(host, port, client_id, timeout_ms, connector=connector)

        effective = self.dynamic_config.effective if self.dynamic_config else self.config
        controller = KafkaController(effective, components.zk, connection_factory=connection)
        controller.startup()
        return controller

    # ------------------------------------------------------------ periodic
    def _every(
        self, interval_s: float, action: Callable[[], Awaitable[None]], name: str
    ) -> asyncio.Task[None]:
        async def loop() -> None:
            while True:
                await asyncio.sleep(max(interval_s, 0.05))
                try:
                    await action()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("periodic task %s failed", name)

        return asyncio.create_task(loop(), name=name)

    async def _shrink_isrs(self) -> None:
        """Propose the ISR shrinks now; the controller's answers arrive in the background."""
        assert self.components is not None
        rm = self.components.replica_manager
        rm.run_in_background(rm.shrink_isrs())
        await asyncio.sleep(0)

    async def _checkpoint(self) -> None:
        assert self.components is not None
        rm = self.components.replica_manager
        await asyncio.to_thread(rm.checkpoint_high_watermarks)

    async def _cleanup_logs(self) -> None:
        assert self.components is not None
        rm = self.components.replica_manager
        hws = {tp: p.high_watermark for tp, p in rm.partitions.items()}
        await asyncio.to_thread(self.components.log_manager.cleanup_logs, now_ms(), hws)

    async def _delete_logs(self) -> None:
        """Remove deleted logs whose ``file.delete.delay.ms`` ran out (``kafka-delete-logs``)."""
        assert self.components is not None
        manager = self.components.log_manager
        now = now_ms()
        if manager.has_due_deletes(now):
            await asyncio.to_thread(manager.delete_due_logs, now)

    async def _checkpoint_log_offsets(self) -> None:
        """Write the recovery point and log start offset checkpoints of every log dir.

        Kafka's ``kafka-recovery-point-checkpoint`` and ``kafka-log-start-offset-checkpoint``
        tasks (``log.flush.offset.checkpoint.interval.ms``, ``log.flush.start.offset.
        checkpoint.interval.ms``; here both files at the shorter of the two).
        """
        assert self.components is not None
        manager = self.components.log_manager
        await asyncio.to_thread(manager.checkpoint_recovery_points_and_log_start_offsets)

    async def _flush_dirty_logs(self) -> None:
        """Fsync logs whose last fsync is older than their ``flush.ms`` (LogManager.flushDirtyLogs).

        Runs every ``log.flush.scheduler.interval.ms`` (Kafka's default, Long.MAX, never
        runs it; here it is checked at least every ``FLUSH_CHECK_MAX_INTERVAL_MS``).
        """
        assert self.components is not None
        await asyncio.to_thread(self.components.log_manager.flush_dirty_logs, now_ms())

    # ------------------------------------------------------------ configs
    def _read_dynamic_broker_configs(self) -> tuple[dict[str, str], dict[str, str]]:
        """Read ``/config/brokers/<id>`` and ``/config/brokers/<default>``."""
        assert self.zk is not None
        own = str(self.broker_id)
        entities = self.zk.get_entity_configs("brokers", [own, DEFAULT_BROKER_ENTITY])
        return dict(entities[own].config), dict(entities[DEFAULT_BROKER_ENTITY].config)

    async def _apply_dynamic_broker_configs(self) -> None:
        """Re-read this broker's dynamic configs and apply what changed (KIP-226).

        Topic log configs follow new log defaults (``log.retention.ms``, ``message.max.bytes``,
        ...), the socket server its connection limits, the controller its
        ``unclean.leader.election.enable`` default, the log cleaner its ``log.cleaner.*``
        settings (Kafka's ``LogCleaner.reconfigure``).
        """
        assert self.components is not None and self.dynamic_config is not None
        own, default = await asyncio.to_thread(self._read_dynamic_broker_configs)
        dynamic = self.dynamic_config
        if not await asyncio.to_thread(dynamic.update, own, default):
            return
        effective = dynamic.effective
        log.info(
            "broker %d: dynamic broker configs now %s / default %s",
            self.broker_id,
            dynamic.per_broker,
            dynamic.cluster_default,
        )
        self.components.topic_configs.set_broker_config(effective)
        if self.socket_server is not None:
            self.socket_server.connection_quotas.update(
                effective.max_connections_per_ip, effective.max_connections_per_ip_overrides
            )
        controller = self.components.controller
        machine = getattr(controller, "partition_state_machine", None)
        if machine is not None:
            machine.set_unclean_default(effective.unclean_leader_election_enable)
        cleaner = self.components.log_manager.cleaner
        wanted = cleaner_config(effective)
        if cleaner is not None and cleaner.config != wanted:
            log.info("broker %d: reconfiguring the log cleaner: %s", self.broker_id, wanted)
            try:  # stops and restarts the cleaner threads, off the event loop
                await asyncio.to_thread(cleaner.reconfigure, wanted)
            except ValueError as exc:  # written to ZooKeeper by other means than the API
                log.error("log cleaner not reconfigured: %s", exc)

    def _maybe_enable_unclean_election(self, topic: str) -> None:
        """Tell the controller when a topic now allows unclean elections.

        Kafka's ``TopicConfigHandler``: the active controller then elects the topic's
        offline partitions.
        """
        assert self.components is not None
        controller = self.components.controller
        enable = getattr(controller, "enable_topic_unclean_leader_election", None)
        if enable is not None and self.components.topic_configs.unclean_leader_election_enable(
            topic
        ):
            enable(topic)

    def _load_topic_configs(self, topic_configs: TopicConfigs) -> None:
        assert self.zk is not None
        topics = self.zk.get_all_topics()
        configs = self.zk.get_entity_configs("topics", topics)
        for name in topics:
            entity = configs.get(name)
            topic_configs.set_overrides(name, entity.config if entity is not None else {})

    def _new_replication_quotas(self) -> ReplicationQuotas:
        """Build the leader and follower quota managers at their static rates (KIP-73)."""
        c = self.config

        def manager(rate: int) -> ReplicationQuotaManager:
            return ReplicationQuotaManager(
                rate, c.replication_quota_window_num, c.replication_quota_window_size_seconds
            )

        return ReplicationQuotas(
            leader=manager(c.leader_replication_throttled_rate),
            follower=manager(c.follower_replication_throttled_rate),
        )

    def _load_throttle_rates(self, quotas: ReplicationQuotas) -> None:
        """Apply the throttle rates from ZooKeeper: per broker, then default, then static."""
        assert self.zk is not None
        own = str(self.broker_id)
        entities = self.zk.get_entity_configs("brokers", [own, DEFAULT_BROKER_ENTITY])
        static = {
            "leader.replication.throttled.rate": self.config.leader_replication_throttled_rate,
            "follower.replication.throttled.rate": self.config.follower_replication_throttled_rate,
        }
        rates = effective_throttle_rates(
            static, dict(entities[DEFAULT_BROKER_ENTITY].config), dict(entities[own].config)
        )
        quotas.apply_broker_rates(rates)
        log.info("broker %d replication throttle rates: %s", self.broker_id, rates)

    def _start_notifications(
        self, name: str, process: Callable[[], Awaitable[None]]
    ) -> NotificationProcessor:
        """Start a :class:`NotificationProcessor` that :meth:`shutdown` stops."""
        processor = NotificationProcessor(f"broker {self.broker_id}: {name}", process)
        processor.start()
        self._notification_processors.append(processor)
        return processor

    async def _apply_config_changes(self) -> None:
        """Apply the ``/config/changes`` notifications not seen yet (one pass).

        Run by a :class:`NotificationProcessor`, one pass at a time; a pass that raises
        is run again, from the first notification not applied yet.

        Raises:
            ZkConnectionLossError: the ZooKeeper session failed meanwhile.
        """
        assert self.zk is not None and self.components is not None
        changes = await asyncio.to_thread(self.zk.get_config_changes, self._last_config_change)
        for seq, change in changes:
            if change.entity_type == "topics":
                entity = await asyncio.to_thread(
                    self.zk.get_entity_config, "topics", change.entity_name
                )
                self.components.topic_configs.set_overrides(change.entity_name, entity.config)
                self._maybe_enable_unclean_election(change.entity_name)
            elif change.entity_type == "users" and "/" not in change.entity_name:
                entity = await asyncio.to_thread(
                    self.zk.get_entity_config, "users", change.entity_name
                )
                self.credentials.update_user(desanitize(change.entity_name), entity.config)
            elif change.entity_type == "brokers" and change.entity_name in (
                str(self.broker_id),
                DEFAULT_BROKER_ENTITY,
            ):
                # Kept across passes: a pass failing below re-reads the broker configs.
                self._broker_configs_changed = True
            self._last_config_change = max(self._last_config_change, seq)
        if self._broker_configs_changed:
            quotas = self.components.replication_quotas
            if quotas is not None:
                await asyncio.to_thread(self._load_throttle_rates, quotas)
            await self._apply_dynamic_broker_configs()
            self._broker_configs_changed = False
        await asyncio.to_thread(self._load_credentials)

    # ------------------------------------------------------------ lifecycle
    async def run(self) -> None:
        """Start, serve until :attr:`shutdown_requested` is set, then shut down."""
        self._loop = asyncio.get_running_loop()
        try:
            await self.startup()
            await self.shutdown_requested.wait()
        finally:
            await self.shutdown()

    async def shutdown(self) -> None:
        """Run controlled shutdown (if enabled), then stop every component (idempotent)."""
        components = self.components
        if components is not None and self.config.controlled_shutdown_enable:
            with contextlib.suppress(Exception):
                await request_controlled_shutdown(components, self.config)
        for task in self._tasks:
            await cancel_and_wait(task)
        self._tasks = []
        for processor in self._notification_processors:
            await processor.stop()
        self._notification_processors = []
        if self.log_dir_failure_handler is not None:
            await self.log_dir_failure_handler.stop()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
            self.metrics_server = None
        if self.socket_server is not None:
            await self.socket_server.stop()
        if components is not None and components.group_coordinator is not None:
            with contextlib.suppress(Exception):
                await components.group_coordinator.shutdown()
        if components is not None:
            if components.log_dir_mover is not None:
                await components.log_dir_mover.stop()
            await components.fetchers.shutdown()
            if self.alter_partition_manager is not None:
                await self.alter_partition_manager.close()
            if components.controller is not None:
                await asyncio.to_thread(components.controller.shutdown)
            with contextlib.suppress(Exception):
                components.replica_manager.checkpoint_high_watermarks()
            await asyncio.to_thread(components.log_manager.shutdown)
        if self.zk is not None:
            await asyncio.to_thread(self.zk.close)
        self.components = None
        self.zk = None


def _log_config_applier(
    topic_configs: TopicConfigs, log_manager: LogManager
) -> Callable[[str, dict[str, str] | None], None]:
    """Return a TopicConfigs listener giving a topic's logs its new effective LogConfig.

    Kafka's ``TopicConfigHandler.processConfigChanges`` / ``LogManager.updateTopicConfig``:
    overrides loaded at start-up and changed later (``cleanup.policy``, segment and
    retention settings, ...) reach the logs already open.
    """

    def apply(topic: str, overrides: dict[str, str] | None) -> None:
        if overrides is None:
            return
        try:
            log_manager.update_topic_config(topic, topic_configs.log_config(topic))
        except LogError as exc:
            log.warning("topic %s: config not applied to its logs: %s", topic, exc)

    return apply


def cleaner_config(config: BrokerConfig) -> CleanerConfig:
    """Return the log cleaner's settings from the broker's (effective) ``log.cleaner.*``."""
    return CleanerConfig(
        num_threads=config.log_cleaner_threads,
        dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
        dedupe_buffer_load_factor=config.log_cleaner_io_buffer_load_factor,
        io_buffer_size=config.log_cleaner_io_buffer_size,
        max_io_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
        backoff_ms=config.log_cleaner_backoff_ms,
        enable=config.log_cleaner_enable,
    )


def _new_log_cleaner(
    config: BrokerConfig, log_dirs: list[Path], logs: LogManager, replicas: ReplicaManager
) -> LogCleaner:
    """Build the log cleaner of compacted topics (``log.cleaner.*``), cleaning up to each HW."""

    def high_watermark(tp: TopicPartition) -> int | None:
        partition = replicas.partitions.get(tp)
        return partition.high_watermark if partition is not None else None

    return LogCleaner(
        cleaner_config(config),
        log_dirs,
        logs.current_logs,
        high_watermark,
        skip=lambda tp: logs.get_future_log(tp.topic, tp.partition) is not None,
        on_io_error=logs.failure_channel.maybe_add_offline_log_dir,
    )


def _resign_offline_coordinators(
    components: BrokerComponents, partitions: list[TopicPartition]
) -> None:
    """Drop the groups of ``__consumer_offsets`` partitions whose log dir went offline."""
    coordinator = components.group_coordinator
    if coordinator is None:
        return
    for tp in partitions:
        if tp.topic == GROUP_METADATA_TOPIC_NAME:
            coordinator.on_resignation(tp.partition, None)


def _new_cluster_id() -> str:
    """Return a new cluster id: 16 random bytes, URL-safe base64, no padding (as Kafka)."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


__all__ = ["KafkaServer", "time"]
