"""The operator's own Prometheus metrics: what it asks of Kafka and the API server (I/O edge).

Served at ``GET /metrics`` on ``KPO_METRICS_PORT`` (:meth:`OperatorMetrics.serve`):

============================================== ===============================================
metric                                         meaning
============================================== ===============================================
``kpo_operator_kafka_admin_requests_total``    Admin API requests sent, by ``cluster`` and
                                               ``api`` (Kafka's request name); a
                                               DescribeLogDirs or DescribeConfigs of brokers
                                               counts one request per broker, as
                                               kafka-python sends them
``kpo_operator_kube_api_requests_total``       requests of the operator's ``kubernetes``
                                               client (status patches, lists, Events, the
                                               throttle ledger), by ``verb`` and
                                               ``resource``; kopf's own watches and patches
                                               are not counted here (the API server's
                                               ``apiserver_request_total`` has them)
``kpo_operator_reconcile_seconds``             duration of reconcile steps, by ``kind``
``kpo_operator_step_interval_seconds``         time between the ends of two successive steps
                                               of one object, by ``kind`` (an object's
                                               status is refreshed at this pace)
``kpo_operator_cluster_reads_total``           cluster snapshots read from Kafka (``fresh``)
                                               or shared from a recent read (``shared``)
``kpo_operator_balancing_anomalies``           anomalies in each BalancingPolicy's status, by
                                               ``cluster``, ``policy`` (``namespace/name``),
                                               ``kind`` and ``state``
``kpo_operator_balancing_fixes_total``         fixes (PartitionReassignments) written by
                                               BalancingPolicies, by ``cluster`` and ``kind``
``process_resident_memory_bytes`` and the      the operator process (prometheus-client's
other ``process_*`` metrics                    process collector)
============================================== ===============================================
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any
from urllib.parse import urlparse

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector
from prometheus_client.exposition import start_http_server


class OperatorMetrics:
    """The operator's metrics in their own registry.

    Attributes:
        registry: The registry served by :meth:`serve`.
        admin_requests: ``kpo_operator_kafka_admin_requests_total{cluster, api}``.
        kube_requests: ``kpo_operator_kube_api_requests_total{verb, resource}``.
        reconcile_seconds: ``kpo_operator_reconcile_seconds{kind}``.
        step_interval_seconds: ``kpo_operator_step_interval_seconds{kind}``.
        cluster_reads: ``kpo_operator_cluster_reads_total{cluster, source}``.
        balancing_anomalies: ``kpo_operator_balancing_anomalies{cluster, policy, kind, state}``.
        balancing_fixes: ``kpo_operator_balancing_fixes_total{cluster, kind}``.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        self.admin_requests = Counter(
            "kpo_operator_kafka_admin_requests",
            "Kafka Admin API requests sent by the operator",
            ["cluster", "api"],
            registry=self.registry,
        )
        self.kube_requests = Counter(
            "kpo_operator_kube_api_requests",
            "Kubernetes API requests of the operator's kubernetes client",
            ["verb", "resource"],
            registry=self.registry,
        )
        self.reconcile_seconds = Histogram(
            "kpo_operator_reconcile_seconds",
            "Duration of one reconcile step",
            ["kind"],
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
            registry=self.registry,
        )
        self.step_interval_seconds = Histogram(
            "kpo_operator_step_interval_seconds",
            "Time between the ends of two successive reconcile steps of one object",
            ["kind"],
            buckets=(0.5, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5, 10.0, 20.0, 60.0),
            registry=self.registry,
        )
        self._last_step: dict[tuple[str, str, str], float] = {}
        self.cluster_reads = Counter(
            "kpo_operator_cluster_reads",
            "Cluster snapshots: read from Kafka (fresh) or shared from a recent read",
            ["cluster", "source"],
            registry=self.registry,
        )
        self.balancing_anomalies = Gauge(
            "kpo_operator_balancing_anomalies",
            "Anomalies in a BalancingPolicy's status, by kind and state",
            ["cluster", "policy", "kind", "state"],
            registry=self.registry,
        )
        self.balancing_fixes = Counter(
            "kpo_operator_balancing_fixes",
            "Fixes (PartitionReassignments) written by BalancingPolicies",
            ["cluster", "kind"],
            registry=self.registry,
        )

    def step_done(self, kind: str, namespace: str, name: str, began: float, ended: float) -> None:
        """Record one reconcile step of an object (monotonic seconds)."""
        self.reconcile_seconds.labels(kind).observe(ended - began)
        previous = self._last_step.get((kind, namespace, name))
        self._last_step[(kind, namespace, name)] = ended
        if previous is not None:
            self.step_interval_seconds.labels(kind).observe(ended - previous)

    def forget(self, kind: str, namespace: str, name: str) -> None:
        """Drop the step history of a deleted object."""
        self._last_step.pop((kind, namespace, name), None)

    def serve(self, port: int, address: str = "0.0.0.0") -> None:
        """Serve ``/metrics`` on ``address:port`` from a daemon thread."""
        start_http_server(port, address, registry=self.registry)

    def admin_observer(self, cluster: str) -> Callable[[str, int], None]:
        """Return a callback counting ``n`` requests of Admin API ``api`` on ``cluster``."""

        def observe(api: str, n: int) -> None:
            if n > 0:
                self.admin_requests.labels(cluster, api).inc(n)

        return observe

    def instrument_kube_client(self, api_client: Any) -> Any:
        """Count every request of a ``kubernetes.client.ApiClient``; returns it.

        Wraps its REST client's ``request`` method, through which every generated API
        call sends its HTTP request.
        """
        rest = api_client.rest_client
        inner = rest.request

        def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            self.kube_requests.labels(method.upper(), kube_resource(url)).inc()
            return inner(method, url, *args, **kwargs)

        rest.request = request
        return api_client


def cluster_label(key: tuple[str, str] | None) -> str:
    """Return the ``cluster`` label of a cluster key: ``default`` or ``namespace/name``."""
    return "default" if key is None else f"{key[0]}/{key[1]}"


def kube_resource(url: str) -> str:
    """Return the resource of an API server URL (``partitionreassignments/status``, ...).

    ``/apis/<group>/<version>[/namespaces/<ns>]/<resource>[/<name>[/<subresource>]]`` and
    ``/api/<version>/...``; anything else is returned as its path.
    """
    parts = [p for p in urlparse(url).path.split("/") if p]
    if len(parts) < 2 or parts[0] not in ("api", "apis"):
        return "/" + "/".join(parts)
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    if len(rest) >= 2 and rest[0] == "namespaces":
        rest = rest[2:] if len(rest) > 2 else ["namespaces"]
    if not rest:
        return "/" + "/".join(parts)
    return rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")


def admin_request_count(brokers: Collection[int] | None, topics: bool = False) -> int:
    """Count the requests one Admin API call sends: one per broker for broker-addressed calls.

    Args:
        brokers: The brokers the call addresses (``None``: not broker-addressed or all).
        topics: The call also has topic resources (DescribeConfigs: one more request).
    """
    if brokers is None:
        return 1
    return len(brokers) + (1 if topics else 0)
