"""The operator's settings, read from the environment (``KPO_*``), the way the chart sets them.

=================================== =============================== ================================
variable                            setting                         meaning
=================================== =============================== ================================
``KPO_BOOTSTRAP_SERVERS``           ``bootstrap_servers``           ``host:port[,host:port...]`` of
                                                                    the managed Kafka cluster
                                                                    (required)
``KPO_NAMESPACES``                  ``namespaces``                  comma-separated namespaces to
                                                                    watch; empty or unset: every
                                                                    namespace
``KPO_POLL_INTERVAL_S``             ``poll_interval_s``             seconds between progress checks
                                                                    of a moving reassignment
                                                                    (default 2)
``KPO_QUOTA_INTERVAL_S``            ``quota_interval_s``            seconds between drift checks of
                                                                    the throttle configs (default
                                                                    30)
``KPO_CLUSTER_INTERVAL_S``          ``cluster_interval_s``          seconds between refreshes of
                                                                    each KafkaCluster's status and
                                                                    Secrets (default 60)
``KPO_POLICY_INTERVAL_S``           ``policy_interval_s``           seconds between two checks of
                                                                    the cluster by each
                                                                    BalancingPolicy (default 30)
``KPO_RATE_WINDOW_S``               ``rate_window_s``               window of the replication-rate
                                                                    estimate behind the ETA (default
                                                                    30)
``KPO_PARTITION_STATUS_INTERVAL_S`` ``partition_status_interval_s`` seconds between writes of the
                                                                    per-partition byte counters of a
                                                                    moving reassignment
                                                                    (``status.partitions``; totals,
                                                                    rate and ETA are written every
                                                                    poll, a partition's state change
                                                                    at once; default 30, 0: every
                                                                    poll)
``KPO_REQUEST_TIMEOUT_MS``          ``request_timeout_ms``          Kafka Admin API request timeout
                                                                    (``request.timeout.ms``, default
                                                                    30000)
``KPO_CLIENT_ID``                   ``client_id``                   ``client.id`` (``kpo-operator``)
``KPO_NAMESPACE``                   ``namespace``                   the operator's own namespace,
                                                                    where the throttle ledger
                                                                    ConfigMap lives (the chart sets
                                                                    the pod's namespace; default:
                                                                    the first of ``KPO_NAMESPACES``,
                                                                    else ``default``)
``KPO_THROTTLE_LEDGER``             ``throttle_ledger``             name of that ConfigMap: what the
                                                                    operator wrote into Kafka's
                                                                    throttle configs
                                                                    (``kpo-throttle-ledger``)
``KPO_KAFKA_CLIENT_CONFIG``         ``kafka_security``              Kafka client properties file
                                                                    (``--command-config`` format:
                                                                    TLS, SASL), default PLAINTEXT
``KPO_KAFKA_<PROPERTY>``            ``kafka_security``              one client property, dots as
                                                                    underscores; ``..._FILE``: its
                                                                    value from a file (a mounted
                                                                    Secret)
``KPO_KAFKA_SASL_USERNAME``         ``kafka_security``              SASL user and password instead
``KPO_KAFKA_SASL_PASSWORD``                                         of ``sasl.jaas.config`` (each
                                                                    also ``..._FILE``)
``KPO_METRICS_PORT``                ``metrics_port``                port of the Prometheus
                                                                    ``/metrics`` endpoint (requests
                                                                    to Kafka and the API server,
                                                                    memory); unset: none
=================================== =============================== ================================

The Kafka client settings are read by
:func:`kpo_kafka.client_config.client_security_from_env` (property names as Kafka's); an
unknown or unsupported setting stops the operator at start with the property named.

The Kubernetes connection is kopf's: in a pod the service account, elsewhere
``KUBECONFIG`` (or ``~/.kube/config``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kpo_kafka.client_config import ClientConfigError, ClientSecurity, client_security_from_env

ENV_PREFIX = "KPO_"
_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"


class SettingsError(ValueError):
    """The environment does not give a usable configuration; the message names the variable."""


class OperatorSettings(BaseModel):
    """How the operator reaches Kafka and how often it looks (see the module's table).

    Attributes:
        bootstrap_servers: ``host:port`` entries of the managed Kafka cluster.
        namespaces: Namespaces to watch; empty means the whole cluster.
        poll_interval_s: Seconds between progress checks of moving reassignments.
        quota_interval_s: Seconds between drift checks of the throttle configs.
        cluster_interval_s: Seconds between refreshes of each KafkaCluster (status,
            Secrets: a rotated Secret reconnects within this time).
        policy_interval_s: Seconds between two checks of the cluster by a BalancingPolicy
            (detectors, gates, fixes).
        rate_window_s: Seconds of samples behind the replication-rate estimate.
        partition_status_interval_s: Seconds between writes of ``status.partitions`` whose
            entries changed only in their byte counters (0: at every poll).
        request_timeout_ms: Admin API request timeout (Kafka's ``request.timeout.ms``).
        client_id: Kafka ``client.id`` of the operator's admin client.
        namespace: The operator's namespace, holding the throttle ledger ConfigMap.
        throttle_ledger: Name of the throttle ledger ConfigMap (one per Kafka cluster).
        kafka_security: TLS and SASL settings of the Kafka client (secrets masked).
        metrics_port: Port of the Prometheus metrics endpoint (``None``: not served).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    bootstrap_servers: tuple[str, ...] = Field(min_length=1)
    namespaces: tuple[str, ...] = ()
    poll_interval_s: float = Field(default=2.0, gt=0, le=3600)
    quota_interval_s: float = Field(default=30.0, gt=0, le=86400)
    cluster_interval_s: float = Field(default=60.0, gt=0, le=86400)
    policy_interval_s: float = Field(default=30.0, gt=0, le=3600)
    rate_window_s: float = Field(default=30.0, gt=0, le=3600)
    partition_status_interval_s: float = Field(default=30.0, ge=0, le=3600)
    request_timeout_ms: int = Field(default=30000, ge=1000, le=600000)
    client_id: str = Field(default="kpo-operator", min_length=1)
    namespace: str = Field(default="default", pattern=_DNS_LABEL)
    throttle_ledger: str = Field(default="kpo-throttle-ledger", pattern=_DNS_SUBDOMAIN)
    kafka_security: ClientSecurity = Field(default_factory=ClientSecurity)
    metrics_port: int | None = Field(default=None, gt=0, lt=65536)

    @field_validator("bootstrap_servers")
    @classmethod
    def _host_port(cls, servers: tuple[str, ...]) -> tuple[str, ...]:
        for server in servers:
            host, sep, port = server.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{server!r} is not host:port")
        return servers

    @property
    def clusterwide(self) -> bool:
        """Whether every namespace is watched (no ``namespaces`` given)."""
        return not self.namespaces

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OperatorSettings:
        """Read the settings from ``KPO_*`` variables (``os.environ`` by default).

        Raises:
            SettingsError: A variable is missing or has a bad value; names the variable.
        """
        env = os.environ if environ is None else environ

        def items(name: str) -> tuple[str, ...]:
            return tuple(p.strip() for p in env.get(ENV_PREFIX + name, "").split(",") if p.strip())

        values: dict[str, object] = {
            "bootstrap_servers": items("BOOTSTRAP_SERVERS"),
            "namespaces": items("NAMESPACES"),
        }
        for name in (
            "poll_interval_s",
            "quota_interval_s",
            "cluster_interval_s",
            "policy_interval_s",
            "rate_window_s",
            "partition_status_interval_s",
        ):
            if (raw := env.get(ENV_PREFIX + name.upper())) is not None:
                values[name] = raw
        if (raw := env.get(ENV_PREFIX + "REQUEST_TIMEOUT_MS")) is not None:
            values["request_timeout_ms"] = raw
        if raw := env.get(ENV_PREFIX + "METRICS_PORT"):
            values["metrics_port"] = raw
        if (raw := env.get(ENV_PREFIX + "CLIENT_ID")) is not None:
            values["client_id"] = raw
        watched = values["namespaces"]
        assert isinstance(watched, tuple)
        values["namespace"] = env.get(ENV_PREFIX + "NAMESPACE") or (
            watched[0] if watched else "default"
        )
        if (raw := env.get(ENV_PREFIX + "THROTTLE_LEDGER")) is not None:
            values["throttle_ledger"] = raw
        try:
            values["kafka_security"] = client_security_from_env(env)
        except ClientConfigError as exc:
            raise SettingsError(f"invalid Kafka client settings: {exc}") from None
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = [
                f"{ENV_PREFIX}{'.'.join(str(p) for p in e['loc'][:1]).upper()}: {e['msg']}"
                for e in exc.errors()
            ]
            raise SettingsError("invalid operator settings: " + "; ".join(problems)) from exc
