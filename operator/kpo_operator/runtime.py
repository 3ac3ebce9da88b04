"""What one operator process holds: the Kafka clients, the API store, the reconcilers, locks.

The kopf handlers are thin calls into :class:`OperatorRuntime`, run by kopf in up to
:data:`MAX_WORKERS` threads. The steps of PartitionReassignments are not taken in those:
the handlers hand the objects to one
:class:`~kpo_operator.reassignment_tracker.ReassignmentTracker` (:meth:`OperatorRuntime.track`),
whose :data:`TRACKER_WORKERS` threads step new and changed objects at once and every
active object once per poll interval. Different objects reconcile at the same time; only
what is shared and not thread-safe is serialised:

- the steps of one object (kopf may run its change handler and its timer at once):
  a per-object lock;
- kafka-python's admin client: each Admin API call borrows its own client from a
  :class:`~kpo_operator.admin_pool.KafkaAdminPool` of :data:`MAX_WORKERS` clients;
- the throttle writer's merge-and-write of the shared configs: its own lock.

Each Kafka cluster (the default connection, each KafkaCluster named in a
``spec.clusterRef``) has its own pool, writer, ledger and reconcilers
(:mod:`kpo_operator.cluster_registry`); :meth:`OperatorRuntime.run_on` picks the
object's.

Errors worth a retry (Kafka unreachable, API server unavailable) surface as
:class:`RetryLater` with the delay to wait.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

from kpo_kafka.admin import KafkaAdmin, KafkaPythonAdmin
from kpo_kafka.admin_types import (
    KafkaAdminError,
    KafkaAuthenticationError,
    KafkaAuthorizationError,
    KafkaUnavailableError,
)
from kpo_operator.admin_pool import KafkaAdminPool
from kpo_operator.balancing.maintenance import StatefulSetState
from kpo_operator.cluster_registry import ClusterRegistry, ClusterRuntime
from kpo_operator.cluster_status import KafkaClusterReconciler, report_unavailable
from kpo_operator.connections import (
    CLUSTER_NOT_FOUND,
    CLUSTER_UNREACHABLE,
    ClusterKey,
    ClusterUnavailable,
    Connection,
    KubeSecretReader,
    SecretReader,
    describe_key,
)
from kpo_operator.event_queue import QueuedEvents
from kpo_operator.kube_workloads import KubeWorkloadReader, WorkloadReader
from kpo_operator.metrics import OperatorMetrics, cluster_label
from kpo_operator.reassignment_tracker import ReassignmentTracker
from kpo_operator.resources import PARTITION_REASSIGNMENT, ResourceKind
from kpo_operator.settings import OperatorSettings
from kpo_operator.store import (
    KubeObjectStore,
    ObjectStore,
    ObjectStoreError,
    kube_api_client,
    plain_copy,
)
from kpo_operator.throttle_ledger import ConfigMapLedgerStore, ThrottleLedgerStore, ledger_key

logger = logging.getLogger(__name__)

T = TypeVar("T")

MAX_WORKERS = 8
"""kopf's threads for the (synchronous) handlers, and the size of the Admin API client pool."""

TRACKER_WORKERS = 16
"""Threads stepping PartitionReassignments (:class:`ReassignmentTracker`).

A step mostly waits: for its status PATCH (about 25 ms with a few in flight on an idle
2-core machine, 0.4 s when the API server gets a sixth of a core), for the cluster read
its tick shares, or for a throttle sync or a submission it shares with the tick's other
steps. 200 objects polled every 2 s need 100 steps a second: a dozen or more in flight.
"""

KUBE_CONNECTIONS = MAX_WORKERS + TRACKER_WORKERS
"""Connections the ``kubernetes`` client keeps open to the API server: one per thread that
may call it at once. With fewer (its default: 5 per CPU), the threads beyond them opened a
new TLS connection per request and dropped it afterwards."""

REFUSED_RETRY_S = 30.0
"""Seconds before retrying a step Kafka refused (a missing ACL, refused credentials): a
person must change something first, so no quick retries."""


class RetryLater(Exception):  # noqa: N818 - the name says what the caller must do
    """A step could not finish now; try again after ``delay_s`` seconds.

    Attributes:
        delay_s: Seconds to wait before the next attempt.
    """

    def __init__(self, message: str, delay_s: float) -> None:
        super().__init__(message)
        self.delay_s = delay_s


class OperatorRuntime:
    """The operator's long-lived objects.

    Args:
        settings: The operator settings.
        admin: The Admin API client of the default connection, used from several
            threads at once (default: a pool of :data:`MAX_WORKERS` kafka-python clients
            on ``bootstrap_servers``).
        store: The Kubernetes API (default: the ``kubernetes`` client on ``namespaces``).
        ledger_store: Where the default cluster's throttle ownership ledger is kept
            (default: key ``ledger.json`` of the ConfigMap ``throttle_ledger`` in the
            operator's ``namespace``).
        secrets: Reads the Secrets KafkaClusters reference (default: the ``kubernetes``
            client).
        ledger_store_for: The ledger store of a KafkaCluster (default: its own key of the
            same ConfigMap, :func:`~kpo_operator.throttle_ledger.ledger_key`).
        client_for: Makes an Admin API client for a KafkaCluster's connection (default
            kafka-python).
        metrics: The operator's metrics: Admin API requests of the default pool and the
            KafkaClusters' pools, requests of the ``kubernetes`` client (``None``: none).
        workloads: Reads the brokers' StatefulSets for BalancingPolicies' maintenance
            rules (default: the ``kubernetes`` client, made on first use).

    The default cluster's runtime is also reachable as ``admin``, ``writer``,
    ``reassignments`` and ``quotas``; KafkaClusters' through :attr:`clusters`.
    """

    def __init__(
        self,
        settings: OperatorSettings,
        admin: KafkaAdmin | None = None,
        store: ObjectStore | None = None,
        ledger_store: ThrottleLedgerStore | None = None,
        secrets: SecretReader | None = None,
        ledger_store_for: Callable[[ClusterKey], ThrottleLedgerStore] | None = None,
        client_for: Callable[[Connection], KafkaAdmin] | None = None,
        metrics: OperatorMetrics | None = None,
        workloads: WorkloadReader | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        default_admin: KafkaAdmin = admin or KafkaAdminPool(
            lambda: KafkaPythonAdmin(
                ",".join(settings.bootstrap_servers),
                client_id=settings.client_id,
                request_timeout_ms=settings.request_timeout_ms,
                security=settings.kafka_security,
            ),
            MAX_WORKERS,
            metrics.admin_observer(cluster_label(None)) if metrics else None,
        )
        api_client: list[Any] = []

        def kube() -> Any:
            if not api_client:
                made = _with_connections(kube_api_client(), KUBE_CONNECTIONS)
                api_client.append(metrics.instrument_kube_client(made) if metrics else made)
            return api_client[0]

        # Events are posted by a thread of their own: a step does not wait for them.
        self.store = store or QueuedEvents(KubeObjectStore(settings.namespaces, kube()))

        def config_map_ledger(key: ClusterKey) -> ThrottleLedgerStore:
            return ConfigMapLedgerStore(
                settings.namespace, settings.throttle_ledger, kube(), ledger_key(key)
            )

        default = ClusterRuntime(
            None,
            default_admin,
            self.store,
            ledger_store or config_map_ledger(None),
            settings,
            metrics=metrics,
        )
        self.admin = default.admin
        self.writer = default.writer
        self.reassignments = default.reassignments
        self.quotas = default.quotas
        self.clusters = ClusterRegistry(
            settings,
            self.store,
            secrets or _LazySecretReader(kube),
            default,
            ledger_store_for or config_map_ledger,
            client_for,
            metrics,
        )
        self.kafka_clusters = KafkaClusterReconciler(self.store, self.clusters)
        self.workloads: WorkloadReader = workloads or _LazyWorkloadReader(kube)
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self.tracker = ReassignmentTracker(
            self._step_reassignment,
            settings.poll_interval_s,
            TRACKER_WORKERS,
            prepare=self._prepare_polls,
        )

    def track(
        self,
        namespace: str,
        name: str,
        cluster_ref: str | None,
        body: Any,
        urgent: bool = False,
    ) -> None:
        """Hand a PartitionReassignment to the tracker (kopf's handlers; never blocks).

        ``body``: kopf's body of the object (a timer's is kept current by kopf's watch);
        ``urgent``: it was created, changed or resumed: step it now.
        """
        self.tracker.track(namespace, name, cluster_ref, body, urgent)

    def _step_reassignment(
        self, namespace: str, name: str, cluster_ref: str | None, body: Any
    ) -> str | None:
        """One tracker step: :meth:`run_on` of the reconciler, the object read from ``body``.

        Raises:
            RetryLater: As :meth:`run_on` (the tracker waits ``delay_s`` before the next).
        """
        known = plain_copy(body) if body is not None else None
        return self.run_on(
            PARTITION_REASSIGNMENT,
            namespace,
            name,
            cluster_ref,
            lambda cluster: cluster.reassignments.reconcile(namespace, name, known),
        )

    def _prepare_polls(self) -> None:
        """Before a tick's polls: one throttle sync per cluster confirms its waiting objects.

        (:meth:`~kpo_operator.reassignment.ReassignmentReconciler.confirm_throttles`)
        """
        done: list[ClusterRuntime] = []
        for namespace, ref in self.tracker.cluster_refs():
            cluster = self.clusters.known(namespace, ref) if ref else self.clusters.default
            if cluster is None or any(c is cluster for c in done):
                continue
            done.append(cluster)
            try:
                cluster.reassignments.confirm_throttles()
            except (KafkaAdminError, ObjectStoreError) as exc:
                logger.info("throttle sync before the polls failed: %s", exc)

    @contextmanager
    def _serialised(self, key: str) -> Iterator[None]:
        with self._locks_guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            yield

    def run(self, kind: str, namespace: str, name: str, step: Callable[[], T]) -> T:
        """Run ``step`` for one object under its lock, turning transient failures into retries.

        Steps of different objects run concurrently; those of one object one at a time.

        Raises:
            RetryLater: Kafka or the API server failed; the message says which.
        """
        with self._serialised(f"{kind}/{namespace}/{name}"):
            return self._retrying(step)

    def run_on(
        self,
        kind: ResourceKind,
        namespace: str,
        name: str,
        cluster_ref: str | None,
        step: Callable[[ClusterRuntime], T],
        when_missing: Callable[[], T] | None = None,
    ) -> T:
        """Run ``step`` on the runtime of the cluster the object names, under the object's lock.

        Without ``cluster_ref`` that is the default connection. When the KafkaCluster
        is missing or unusable, or (with ``cluster_ref``) its brokers do not answer, the
        object gets ``Ready`` False / ``Stalled`` True with the reason and nothing is
        changed in Kafka; ``when_missing`` (finalizers), if given, is returned instead
        for a KafkaCluster that does not exist.

        Raises:
            RetryLater: The cluster cannot be used now, Kafka or the API server failed.
        """
        with (
            self._serialised(f"{kind.plural}/{namespace}/{name}"),
            self._timed(kind, namespace, name),
        ):
            try:
                cluster = self.clusters.get(namespace, cluster_ref)
            except ClusterUnavailable as exc:
                if exc.reason == CLUSTER_NOT_FOUND and when_missing is not None:
                    return when_missing()
                self._unavailable(kind, namespace, name, exc.reason, exc.message)
                raise RetryLater(exc.message, self.settings.cluster_interval_s) from exc
            try:
                return self._retrying(lambda: step(cluster))
            except RetryLater as exc:
                cause = exc.__cause__
                if cluster_ref is not None and isinstance(cause, KafkaUnavailableError):
                    what = f"{describe_key(cluster.key)} unreachable: {cause}"
                    self._unavailable(kind, namespace, name, CLUSTER_UNREACHABLE, what)
                raise

    @contextmanager
    def _timed(self, kind: ResourceKind, namespace: str, name: str) -> Iterator[None]:
        """Record the step's duration and the time since the object's previous step."""
        began = time.monotonic()
        try:
            yield
        finally:
            if self.metrics is not None:
                self.metrics.step_done(kind.plural, namespace, name, began, time.monotonic())

    def _unavailable(
        self, kind: ResourceKind, namespace: str, name: str, reason: str, message: str
    ) -> None:
        obj = self.store.get(kind, namespace, name)
        if obj is not None and not obj["metadata"].get("deletionTimestamp"):
            report_unavailable(self.store, kind, obj, reason, message, datetime.now(UTC))

    def _retrying(self, step: Callable[[], T]) -> T:
        try:
            return step()
        except (KafkaAuthorizationError, KafkaAuthenticationError) as exc:
            delay = max(REFUSED_RETRY_S, self.settings.poll_interval_s * 2)
            raise RetryLater(f"Kafka refused the operator: {exc}", delay) from exc
        except KafkaAdminError as exc:
            raise RetryLater(f"Kafka: {exc}", self.settings.poll_interval_s * 2) from exc
        except ObjectStoreError as exc:
            raise RetryLater(f"Kubernetes API: {exc}", self.settings.poll_interval_s) from exc

    def forget(self, kind: str, namespace: str, name: str) -> None:
        """Drop the lock of a deleted object (and stop tracking a PartitionReassignment)."""
        if kind == PARTITION_REASSIGNMENT.plural:
            self.tracker.forget(namespace, name)
        with self._locks_guard:
            self._locks.pop(f"{kind}/{namespace}/{name}", None)
        if self.metrics is not None:
            self.metrics.forget(kind, namespace, name)

    def close(self) -> None:
        """Stop the tracker, close the Kafka connections of every cluster."""
        self.tracker.close()
        self.clusters.close()


def _with_connections(api_client: Any, size: int) -> Any:
    """Give a ``kubernetes.client.ApiClient`` a connection pool of ``size``; return it."""
    from kubernetes.client import rest

    api_client.configuration.connection_pool_maxsize = size
    api_client.rest_client = rest.RESTClientObject(api_client.configuration)
    return api_client


class _LazyWorkloadReader:
    """A :class:`KubeWorkloadReader` made on first use."""

    def __init__(self, api_client: Callable[[], Any]) -> None:
        self._api_client = api_client
        self._reader: KubeWorkloadReader | None = None

    def statefulset(
        self, namespace: str, name: str, broker_id_offset: int = 0
    ) -> StatefulSetState | None:
        """See :meth:`~kpo_operator.kube_workloads.WorkloadReader.statefulset`."""
        if self._reader is None:
            self._reader = KubeWorkloadReader(self._api_client())
        return self._reader.statefulset(namespace, name, broker_id_offset)


class _LazySecretReader:
    """A :class:`KubeSecretReader` made on first use (no API client until a Secret is read)."""

    def __init__(self, api_client: Callable[[], Any]) -> None:
        self._api_client = api_client
        self._reader: KubeSecretReader | None = None

    def read(self, namespace: str, name: str, key: str) -> str:
        """See :meth:`~kpo_operator.connections.SecretReader.read`."""
        if self._reader is None:
            self._reader = KubeSecretReader(self._api_client())
        return self._reader.read(namespace, name, key)
