"""What one operator process holds: the Kafka clients, the API store, the reconcilers, locks.

The kopf handlers are thin calls into :class:`OperatorRuntime`, run by kopf in up to
:data:`MAX_WORKERS` threads. Different objects reconcile at the same time; only what
is shared and not thread-safe is serialised:

- the steps of one object (kopf may run its change handler and its timer at once):
  a per-object lock;
- kafka-python's admin client: each Admin API call borrows its own client from a
  :class:`~kpo_operator.admin_pool.KafkaAdminPool` of :data:`MAX_WORKERS` clients;
- the throttle writer's merge-and-write of the shared configs: its own lock.

Errors worth a retry (Kafka unreachable, API server unavailable) surface as
:class:`RetryLater` with the delay to wait.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from kpo_kafka.admin import KafkaAdmin, KafkaPythonAdmin
from kpo_kafka.admin_types import (
    KafkaAdminError,
    KafkaAuthenticationError,
    KafkaAuthorizationError,
)
from kpo_operator.admin_pool import KafkaAdminPool
from kpo_operator.quota import QuotaReconciler
from kpo_operator.reassignment import ReassignmentReconciler
from kpo_operator.settings import OperatorSettings
from kpo_operator.store import KubeObjectStore, ObjectStore, ObjectStoreError, kube_api_client
from kpo_operator.throttle_ledger import ConfigMapLedgerStore, ThrottleLedgerStore
from kpo_operator.throttle_writer import ThrottleWriter

logger = logging.getLogger(__name__)

T = TypeVar("T")

MAX_WORKERS = 8
"""kopf's threads for the (synchronous) handlers, and the size of the Admin API client pool."""

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
        admin: The Admin API client, used from several threads at once (default: a pool
            of :data:`MAX_WORKERS` kafka-python clients on ``bootstrap_servers``).
        store: The Kubernetes API (default: the ``kubernetes`` client on ``namespaces``).
        ledger_store: Where the throttle ownership ledger is kept (default: the
            ConfigMap ``throttle_ledger`` in the operator's ``namespace``).
    """

    def __init__(
        self,
        settings: OperatorSettings,
        admin: KafkaAdmin | None = None,
        store: ObjectStore | None = None,
        ledger_store: ThrottleLedgerStore | None = None,
    ) -> None:
        self.settings = settings
        self.admin: KafkaAdmin = admin or KafkaAdminPool(
            lambda: KafkaPythonAdmin(
                ",".join(settings.bootstrap_servers),
                client_id=settings.client_id,
                request_timeout_ms=settings.request_timeout_ms,
                security=settings.kafka_security,
            ),
            MAX_WORKERS,
        )
        api_client = kube_api_client() if store is None or ledger_store is None else None
        self.store = store or KubeObjectStore(settings.namespaces, api_client)
        self.ledger_store = ledger_store or ConfigMapLedgerStore(
            settings.namespace, settings.throttle_ledger, api_client
        )
        self.writer = ThrottleWriter(self.admin, self.store, self.ledger_store)
        self.reassignments = ReassignmentReconciler(
            self.admin,
            self.store,
            self.writer,
            rate_window_s=settings.rate_window_s,
            throttle_resync_s=settings.quota_interval_s,
        )
        self.quotas = QuotaReconciler(self.store, self.writer)
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

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
        """Drop the lock of a deleted object."""
        with self._locks_guard:
            self._locks.pop(f"{kind}/{namespace}/{name}", None)

    def close(self) -> None:
        """Close the Kafka connections."""
        self.admin.close()
