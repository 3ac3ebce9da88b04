"""One operator, several Kafka clusters: everything per cluster, nothing shared between them.

Each Kafka cluster the operator acts on has its own :class:`ClusterRuntime`: an Admin
API client pool, a :class:`~kpo_operator.throttle_writer.ThrottleWriter` with its own
lock and ownership ledger (its own ConfigMap key), and its own reconcilers, all over a
:class:`ScopedStore` that lists only the objects naming that cluster. A sync of
cluster A therefore merges only A's quotas and moves, reads and writes only A's
configs, and attributes in-flight partitions only to A's reassignments: a quota on A
never writes to B.

The default connection (the operator's ``KPO_*`` settings) serves objects without
``spec.clusterRef`` exactly as before KafkaClusters existed. :class:`ClusterRegistry`
creates the runtime of a KafkaCluster when it is first needed and reconnects it when
its connection changes (a new spec, a rotated Secret: a different
:attr:`~kpo_operator.connections.Connection.fingerprint`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kpo_kafka.admin import KafkaAdmin, KafkaPythonAdmin
from kpo_operator.admin_pool import KafkaAdminPool
from kpo_operator.balancing.reconciler import BalancingPolicyReconciler
from kpo_operator.cluster_reader import SharedClusterReader
from kpo_operator.connections import (
    CLUSTER_NOT_FOUND,
    ClusterKey,
    ClusterUnavailable,
    Connection,
    SecretReader,
    cluster_key_of,
    describe_key,
    resolve_connection,
)
from kpo_operator.cordon_writer import CordonWriter, cordon_store_beside
from kpo_operator.metrics import OperatorMetrics, cluster_label
from kpo_operator.quota import QuotaReconciler
from kpo_operator.reassignment import ReassignmentReconciler
from kpo_operator.reassignment_index import ReassignmentIndex
from kpo_operator.resources import KAFKA_CLUSTER, ResourceKind
from kpo_operator.settings import OperatorSettings
from kpo_operator.store import Object, ObjectStore
from kpo_operator.throttle_ledger import ThrottleLedgerStore
from kpo_operator.throttle_writer import ThrottleWriter

logger = logging.getLogger(__name__)

OWNERS_RELIST_S = 30.0
"""Seconds between two lists of every PartitionReassignment for the cluster's index.

The index (:class:`~kpo_operator.reassignment_index.ReassignmentIndex`: in-flight owners and the
throttle sync's contributors) is kept current by the steps (each records its object as
read and as written), so the list only catches objects no step of this process has seen
or changed elsewhere; listed each half poll interval, it was most of the operator's CPU
(every object's status, up to 2,000 entries, decoded), and once per throttle sync more."""

POOL_SIZE = 8
"""Admin API clients per cluster (kopf's worker threads, :data:`runtime.MAX_WORKERS`)."""


class ScopedStore:
    """An :class:`~kpo_operator.store.ObjectStore` whose :meth:`list` sees one cluster's objects.

    Args:
        store: The whole store.
        key: The cluster: ``(namespace, name)`` of a KafkaCluster, ``None`` for the
            default connection (objects without ``spec.clusterRef``).
    """

    def __init__(self, store: ObjectStore, key: ClusterKey) -> None:
        self._store = store
        self.key = key

    def get(
        self, kind: ResourceKind, namespace: str, name: str, known: Object | None = None
    ) -> Object | None:
        """See :meth:`ObjectStore.get` (any object: the caller chose it)."""
        return self._store.get(kind, namespace, name, known)

    def list(self, kind: ResourceKind) -> list[Object]:
        """Every object of ``kind`` that acts on this cluster."""
        return [o for o in self._store.list(kind) if cluster_key_of(o) == self.key]

    def patch_status(
        self, kind: ResourceKind, namespace: str, name: str, status: Mapping[str, Any]
    ) -> Object | None:
        """See :meth:`ObjectStore.patch_status`."""
        return self._store.patch_status(kind, namespace, name, status)

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """See :meth:`ObjectStore.event`."""
        self._store.event(obj, type_, reason, message)

    def create(self, kind: ResourceKind, namespace: str, body: Mapping[str, Any]) -> Object | None:
        """See :meth:`ObjectStore.create`."""
        return self._store.create(kind, namespace, body)

    def patch(
        self, kind: ResourceKind, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> Object | None:
        """See :meth:`ObjectStore.patch`."""
        return self._store.patch(kind, namespace, name, patch)


class ClusterRuntime:
    """What the operator holds for one Kafka cluster.

    Args:
        key: Which cluster (:data:`~kpo_operator.connections.ClusterKey`).
        admin: Its Admin API client (a pool, used from several threads).
        store: The Kubernetes API (wrapped in a :class:`ScopedStore` for ``key``).
        ledger_store: Where this cluster's throttle ownership ledger is kept.
        settings: Intervals of the reconcilers.
        connection: The KafkaCluster connection ``admin`` uses (``None``: the default).
        metrics: Where shared reads are counted (``None``: not counted).

    The cluster's reassignments and its throttle writer share one cluster read per half
    poll interval (:class:`~kpo_operator.cluster_reader.SharedClusterReader`) and one
    index of its PartitionReassignments
    (:class:`~kpo_operator.reassignment_index.ReassignmentIndex`, ``index``: the
    in-flight owners of the steps and the contributors of the throttle syncs), kept
    current by the steps and listed every :data:`OWNERS_RELIST_S`, so the requests to
    Kafka and the API server grow with the number of clusters, not of objects.
    """

    def __init__(
        self,
        key: ClusterKey,
        admin: KafkaAdmin,
        store: ObjectStore,
        ledger_store: ThrottleLedgerStore,
        settings: OperatorSettings,
        connection: Connection | None = None,
        metrics: OperatorMetrics | None = None,
    ) -> None:
        self.key = key
        self.admin = admin
        self.store = ScopedStore(store, key)
        self.connection = connection
        self.cordons = CordonWriter(admin, self.store, cordon_store_beside(ledger_store))
        share_s = settings.poll_interval_s / 2
        observe = None
        if metrics is not None:
            counter, label = metrics.cluster_reads, cluster_label(key)
            observe = lambda source: counter.labels(label, source).inc()  # noqa: E731
        # While a read is in flight the last one is shared for as long as a read may take
        # (the request timeout): waiting made every worker wait for slow brokers.
        stale_s = max(4 * share_s, settings.request_timeout_ms / 1000)
        self.reader = SharedClusterReader(admin, share_s, observe=observe, serve_stale_s=stale_s)
        self.index = ReassignmentIndex(self.store, max(share_s, OWNERS_RELIST_S))
        self.writer = ThrottleWriter(
            admin, self.store, ledger_store, reader=self.reader, index=self.index
        )
        self.reassignments = ReassignmentReconciler(
            admin,
            self.store,
            self.writer,
            rate_window_s=settings.rate_window_s,
            throttle_resync_s=settings.quota_interval_s,
            partition_status_interval_s=settings.partition_status_interval_s,
            cordons=self.cordons,
            reader=self.reader,
            owners=self.index,
        )
        self.quotas = QuotaReconciler(self.store, self.writer)
        self.policies = BalancingPolicyReconciler(
            admin, self.store, metrics=metrics, cluster=cluster_label(key)
        )

    def close(self) -> None:
        """Close the Kafka connections."""
        self.admin.close()


def kafka_python_client(connection: Connection, client_id: str) -> KafkaAdmin:
    """Return a (lazily connecting) kafka-python Admin client for ``connection``."""
    return KafkaPythonAdmin(
        ",".join(connection.bootstrap_servers),
        client_id=client_id,
        request_timeout_ms=connection.request_timeout_ms,
        security=connection.security,
    )


class ClusterRegistry:
    """The :class:`ClusterRuntime` of the default connection and of each KafkaCluster in use.

    Args:
        settings: The operator settings (default request timeout, client id, intervals).
        store: The Kubernetes API (KafkaCluster objects and everything the runtimes need).
        secrets: Reads the Secrets KafkaClusters reference.
        default: The runtime of the default connection.
        ledger_store_for: The ledger store of a KafkaCluster's key.
        client_for: Makes one Admin API client for a connection (default kafka-python);
            each KafkaCluster gets a pool of up to :data:`POOL_SIZE` of them.
        metrics: Counts each KafkaCluster's Admin API requests (``None``: not counted).
    """

    def __init__(
        self,
        settings: OperatorSettings,
        store: ObjectStore,
        secrets: SecretReader,
        default: ClusterRuntime,
        ledger_store_for: Callable[[ClusterKey], ThrottleLedgerStore],
        client_for: Callable[[Connection], KafkaAdmin] | None = None,
        metrics: OperatorMetrics | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.store = store
        self.secrets = secrets
        self.default = default
        self._ledger_store_for = ledger_store_for
        self._client_for = client_for or (lambda c: kafka_python_client(c, settings.client_id))
        self._lock = threading.Lock()
        self._clusters: dict[tuple[str, str], ClusterRuntime] = {}

    def get(self, namespace: str, cluster_ref: str | None) -> ClusterRuntime:
        """Return the runtime an object in ``namespace`` with ``spec.clusterRef`` acts on.

        A KafkaCluster not used before is read (with its Secrets) and connected.

        Raises:
            ClusterUnavailable: The KafkaCluster does not exist (:data:`CLUSTER_NOT_FOUND`),
                or its Secrets or settings are unusable; nothing was sent to Kafka.
        """
        if not cluster_ref:
            return self.default
        with self._lock:
            known = self._clusters.get((namespace, cluster_ref))
        if known is not None:
            return known
        obj = self.store.get(KAFKA_CLUSTER, namespace, cluster_ref)
        if obj is None:
            raise ClusterUnavailable(
                CLUSTER_NOT_FOUND,
                f"{describe_key((namespace, cluster_ref))} not found (spec.clusterRef)",
            )
        return self.connect(obj)

    def connect(self, obj: Object) -> ClusterRuntime:
        """Resolve a KafkaCluster object and return its runtime, reconnecting if it changed.

        Raises:
            ClusterUnavailable: Its Secrets or settings are unusable (the runtime, if
                any, keeps its current connection).
        """
        meta = obj["metadata"]
        key = (str(meta["namespace"]), str(meta["name"]))
        connection = resolve_connection(obj, self.secrets, self.settings.request_timeout_ms)
        with self._lock:
            runtime = self._clusters.get(key)
            if runtime is None:
                observe = self.metrics.admin_observer(cluster_label(key)) if self.metrics else None
                admin = KafkaAdminPool(lambda: self._client_for(connection), POOL_SIZE, observe)
                runtime = ClusterRuntime(
                    key,
                    admin,
                    self.store,
                    self._ledger_store_for(key),
                    self.settings,
                    connection,
                    self.metrics,
                )
                self._clusters[key] = runtime
                logger.info(
                    "%s: connecting to %s (%s)",
                    describe_key(key),
                    ",".join(connection.bootstrap_servers),
                    connection.security.describe(),
                )
            elif runtime.connection is None or (
                runtime.connection.fingerprint != connection.fingerprint
            ):
                assert isinstance(runtime.admin, KafkaAdminPool)
                runtime.admin.reconnect(lambda: self._client_for(connection))
                runtime.connection = connection
                logger.info(
                    "%s: connection changed, reconnecting to %s (%s)",
                    describe_key(key),
                    ",".join(connection.bootstrap_servers),
                    connection.security.describe(),
                )
        return runtime

    def known(self, namespace: str, name: str) -> ClusterRuntime | None:
        """Return the runtime of KafkaCluster ``namespace/name`` if it was connected."""
        with self._lock:
            return self._clusters.get((namespace, name))

    def drop(self, namespace: str, name: str) -> None:
        """Forget a deleted KafkaCluster and close its connections."""
        with self._lock:
            runtime = self._clusters.pop((namespace, name), None)
        if runtime is not None:
            runtime.close()

    def close(self) -> None:
        """Close every cluster's connections."""
        with self._lock:
            runtimes, self._clusters = list(self._clusters.values()), {}
        for runtime in [self.default, *runtimes]:
            runtime.close()
