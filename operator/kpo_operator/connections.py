"""Turn a KafkaCluster object into a Kafka client connection (Secrets read at the I/O edge).

A KafkaCluster (``crds/kpo.dev_kafkaclusters.yaml``) holds the bootstrap servers, the
non-secret client properties by Kafka's names (``spec.config``) and, for the secret
ones, references to keys of Secrets in its own namespace (``spec.secretRefs``).
:func:`resolve_connection` reads those Secrets through a :class:`SecretReader` and
builds the same :class:`~kpo_kafka.client_config.ClientSecurity` that the operator's
own ``KPO_KAFKA_*`` settings give, so every property is checked by the same rules
(:meth:`~kpo_kafka.client_config.ClientSecurity.from_properties`).

Secret values are held only in :class:`~kpo_kafka.client_config.Secret` wrappers and
in the :attr:`Connection.fingerprint` digest; no message built here contains one.

Objects of the other kinds name a KafkaCluster in ``spec.clusterRef``;
:func:`cluster_key_of` gives the :data:`ClusterKey` an object belongs to (``None``:
the operator's default connection).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kpo_kafka.client_config import ClientConfigError, ClientSecurity, Secret
from kpo_kafka.specs import KafkaClusterSpec, SpecError

ClusterKey = tuple[str, str] | None
"""``(namespace, name)`` of a KafkaCluster, or ``None`` for the default connection."""

CLUSTER_NOT_FOUND = "ClusterNotFound"
"""Reason: the KafkaCluster named in ``spec.clusterRef`` does not exist."""
SECRET_NOT_FOUND = "SecretNotFound"
"""Reason: a Secret (or a key of it) that a KafkaCluster references cannot be read."""
INVALID_CONFIG = "InvalidConfig"
"""Reason: the KafkaCluster's spec or client properties are refused."""
CLUSTER_UNREACHABLE = "ClusterUnreachable"
"""Reason: the brokers of the cluster did not answer (connection, timeout)."""

_PEM_TRUSTSTORE = "ssl.truststore.certificates"
_PEM_KEYSTORE = ("ssl.keystore.certificate.chain", "ssl.keystore.key")
_SASL_USERNAME = "sasl.username"
_SASL_PASSWORD = "sasl.password"


class ClusterUnavailable(Exception):  # noqa: N818 - a state, as Kafka's *Exception names
    """The cluster an object names cannot be used now; nothing was sent to Kafka.

    Attributes:
        reason: CamelCase condition reason (:data:`CLUSTER_NOT_FOUND`,
            :data:`SECRET_NOT_FOUND`, :data:`INVALID_CONFIG`).
        message: What is wrong, naming the object, Secret or property (never a value).
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class SecretError(LookupError):
    """A referenced Secret or key cannot be read; the message names it, never its content."""


class SecretReader(Protocol):
    """Reads one key of a core/v1 Secret."""

    def read(self, namespace: str, name: str, key: str) -> str:
        """Return the decoded (UTF-8) value of ``key`` in Secret ``namespace/name``.

        Raises:
            SecretError: The Secret or the key does not exist, or cannot be read.
        """
        ...


class KubeSecretReader:
    """:class:`SecretReader` over the ``kubernetes`` client (needs ``get`` on secrets).

    Args:
        api_client: A configured ``kubernetes.client.ApiClient``.
    """

    def __init__(self, api_client: Any) -> None:
        from kubernetes import client

        self._core = client.CoreV1Api(api_client)

    def read(self, namespace: str, name: str, key: str) -> str:
        """See :meth:`SecretReader.read`."""
        from kubernetes.client.exceptions import ApiException

        where = f"Secret {namespace}/{name}"
        try:
            found: Any = self._core.read_namespaced_secret(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                raise SecretError(f"{where} not found") from None
            raise SecretError(f"{where}: {exc.status} {exc.reason}") from None
        except Exception as exc:  # connection errors of urllib3
            raise SecretError(f"{where}: {type(exc).__name__}") from None
        data = found.data or {}
        if key not in data:
            raise SecretError(f"{where} has no key {key!r}")
        try:
            return base64.b64decode(data[key], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise SecretError(f"{where} key {key!r} is not UTF-8 text") from None


@dataclass(frozen=True)
class Connection:
    """How to reach one cluster, resolved (Secrets read).

    Attributes:
        bootstrap_servers: ``host:port`` entries.
        security: TLS and SASL settings (secret values masked in ``repr``).
        request_timeout_ms: ``request.timeout.ms`` of the Admin API client.
        fingerprint: SHA-256 over everything above including the secret values: a
            different fingerprint means the clients must reconnect (e.g. a rotated
            password). Never shown anywhere.
    """

    bootstrap_servers: tuple[str, ...]
    security: ClientSecurity
    request_timeout_ms: int
    fingerprint: str


def cluster_key_of(obj: Mapping[str, Any]) -> ClusterKey:
    """Return the cluster an object acts on: ``(namespace, spec.clusterRef)`` or ``None``."""
    spec = obj.get("spec")
    ref = spec.get("clusterRef") if isinstance(spec, Mapping) else None
    if not ref:
        return None
    return (str(obj.get("metadata", {}).get("namespace") or ""), str(ref))


def describe_key(key: ClusterKey) -> str:
    """``KafkaCluster ns/name`` or ``the default cluster``, for messages."""
    return "the default cluster" if key is None else f"KafkaCluster {key[0]}/{key[1]}"


def _fingerprint(
    servers: tuple[str, ...], timeout_ms: int, properties: Mapping[str, str], secrets: list[str]
) -> str:
    digest = hashlib.sha256()
    for part in (*servers, str(timeout_ms), *sorted(f"{k}={v}" for k, v in properties.items())):
        digest.update(part.encode() + b"\0")
    for value in secrets:
        digest.update(hashlib.sha256(value.encode()).digest())
    return digest.hexdigest()


def resolve_connection(
    obj: Mapping[str, Any], secrets: SecretReader, default_timeout_ms: int
) -> Connection:
    """Build the connection of a KafkaCluster object, reading its Secrets.

    Args:
        obj: The KafkaCluster as read from the API server.
        secrets: Reads the referenced Secret keys (in the object's namespace).
        default_timeout_ms: ``request.timeout.ms`` when the spec sets none.

    Raises:
        ClusterUnavailable: :data:`INVALID_CONFIG` for a spec or property combination
            Kafka's client would refuse (naming the property), :data:`SECRET_NOT_FOUND`
            for a Secret or key that cannot be read (naming it).
    """
    meta = obj.get("metadata", {})
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    what = f"KafkaCluster {namespace}/{name}"
    try:
        spec = KafkaClusterSpec.from_object(obj)
    except SpecError as exc:
        raise ClusterUnavailable(INVALID_CONFIG, f"{what}: " + "; ".join(exc.errors)) from None
    properties = spec.config.properties()
    public = dict(properties)
    username: str | None = None
    password: Secret | None = None
    values: list[str] = []
    for prop, ref in sorted(spec.secret_refs.refs().items()):
        try:
            value = secrets.read(namespace, ref.name, ref.key)
        except SecretError as exc:
            raise ClusterUnavailable(
                SECRET_NOT_FOUND, f"{what}: secretRefs.{prop}: {exc}"
            ) from None
        values.append(f"{prop}\0{value}")
        if prop == _SASL_USERNAME:
            username = value.strip()
        elif prop == _SASL_PASSWORD:
            password = Secret(value.rstrip("\r\n"))
        else:
            properties[prop] = value
    if _PEM_TRUSTSTORE in properties:
        properties["ssl.truststore.type"] = "PEM"
    if any(p in properties for p in _PEM_KEYSTORE):
        properties["ssl.keystore.type"] = "PEM"
    try:
        security = ClientSecurity.from_properties(properties, username=username, password=password)
    except ClientConfigError as exc:
        raise ClusterUnavailable(INVALID_CONFIG, f"{what}: {exc}") from None
    timeout = spec.request_timeout_ms or default_timeout_ms
    servers = tuple(spec.bootstrap_servers)
    return Connection(servers, security, timeout, _fingerprint(servers, timeout, public, values))
