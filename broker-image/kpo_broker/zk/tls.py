"""TLS between the broker and ZooKeeper, configured as Kafka configures it (KIP-515).

Kafka's broker properties (``ZkConfigs``), each falling back to the ZooKeeper client's
JVM system property of the second column (from ``KAFKA_OPTS``) when the broker property
is not set (``KafkaConfig.zk*ConfigOrSystemProperty``):

====================================================  =====================================
``zookeeper.ssl.client.enable`` (false)               ``zookeeper.client.secure``
``zookeeper.clientCnxnSocket``                        ``zookeeper.clientCnxnSocket``
``zookeeper.ssl.keystore.location`` / ``.password``   ``zookeeper.ssl.keyStore.location`` ...
``zookeeper.ssl.keystore.type``                       ``zookeeper.ssl.keyStore.type``
``zookeeper.ssl.truststore.location`` / ``.password`` ``zookeeper.ssl.trustStore.location`` ...
``zookeeper.ssl.truststore.type``                     ``zookeeper.ssl.trustStore.type``
``zookeeper.ssl.protocol`` (TLSv1.2)                  ``zookeeper.ssl.protocol``
``zookeeper.ssl.enabled.protocols``                   ``zookeeper.ssl.enabledProtocols``
``zookeeper.ssl.cipher.suites``                       ``zookeeper.ssl.ciphersuites``
``zookeeper.ssl.endpoint.identification.algorithm``   ``zookeeper.ssl.hostnameVerification``
``zookeeper.ssl.crl.enable`` / ``ocsp.enable``        ``zookeeper.ssl.crl`` / ``.ocsp``
====================================================  =====================================

As in Kafka (``KafkaServer.zkClientConfigFromKafkaConfig``) the TLS settings apply only
when TLS is enabled, and TLS needs ``zookeeper.clientCnxnSocket`` set to ZooKeeper's
Netty socket (``org.apache.zookeeper.ClientCnxnSocketNetty``, the only one that speaks
TLS; the NIO socket or no socket refuses start-up rather than connect in the clear).

Stores are PEM only (ZooKeeper's ``PEM`` store type, which Python's ``ssl`` reads): the
keystore is one file with the private key and the certificate chain, its password the
private key's (ZooKeeper's rule), and the truststore the trusted CA certificates (its
password, unused for PEM by ZooKeeper, is ignored here too); an unset type is detected
from the file name as ZooKeeper does (``.pem``; ``.jks``, ``.p12``/``.pfx`` and
``.bcfks`` name stores that refuse start-up). Without a truststore the system's CAs are
trusted, as the JVM's default trust manager does. ``zookeeper.ssl.enabled.protocols``
defaults to ``zookeeper.ssl.protocol`` (ZooKeeper's ``X509Util``); ``TLSv1.2`` and
``TLSv1.3`` are supported, and ``TLS`` means both. Cipher suites are OpenSSL's names,
with the rules of the listeners' ``ssl.cipher.suites`` (:mod:`kpo_broker.security.tls`).
``zookeeper.ssl.endpoint.identification.algorithm=HTTPS`` (the default) checks that the
ZooKeeper server's certificate names the host of ``zookeeper.connect``; empty turns the
check off. Certificate revocation (``crl``/``ocsp``) is not implemented: true refuses
start-up.

With a keystore the broker authenticates to ZooKeeper with its certificate (ZooKeeper's
``x509`` scheme), which lets ``zookeeper.set.acl=true`` work without SASL (Kafka's
``KafkaConfig.zkTlsClientAuthEnabled``).

kazoo's own TLS option cannot restrict protocol versions or trust only the truststore
(it always adds the system CAs), so the connection is wrapped here by a kazoo handler,
:class:`TlsConnectionHandler`, with the context built from these settings; it remembers
the last failed handshake so that a session that never comes up can say why.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kazoo.handlers import utils as kazoo_utils
from kazoo.handlers.threading import SequentialThreadingHandler

from kpo_broker.config import ConfigError
from kpo_broker.security.config import SslSettings
from kpo_broker.security.tls import TlsConfigError, client_context

__all__ = [
    "NETTY_CLIENT_CNXN_SOCKET",
    "SYSTEM_PROPERTY_OF",
    "TlsConnectionHandler",
    "ZkClientTls",
    "resolve_zk_client_tls",
]

ZK_SSL_CLIENT_ENABLE = "zookeeper.ssl.client.enable"
ZK_CLIENT_CNXN_SOCKET = "zookeeper.clientCnxnSocket"
ZK_SSL_KEYSTORE_LOCATION = "zookeeper.ssl.keystore.location"
ZK_SSL_KEYSTORE_PASSWORD = "zookeeper.ssl.keystore.password"
ZK_SSL_KEYSTORE_TYPE = "zookeeper.ssl.keystore.type"
ZK_SSL_TRUSTSTORE_LOCATION = "zookeeper.ssl.truststore.location"
ZK_SSL_TRUSTSTORE_PASSWORD = "zookeeper.ssl.truststore.password"
ZK_SSL_TRUSTSTORE_TYPE = "zookeeper.ssl.truststore.type"
ZK_SSL_PROTOCOL = "zookeeper.ssl.protocol"
ZK_SSL_ENABLED_PROTOCOLS = "zookeeper.ssl.enabled.protocols"
ZK_SSL_CIPHER_SUITES = "zookeeper.ssl.cipher.suites"
ZK_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM = "zookeeper.ssl.endpoint.identification.algorithm"
ZK_SSL_CRL_ENABLE = "zookeeper.ssl.crl.enable"
ZK_SSL_OCSP_ENABLE = "zookeeper.ssl.ocsp.enable"

#: Kafka property -> the ZooKeeper client system property it overrides
#: (``ZkConfigs.ZK_SSL_CONFIG_TO_SYSTEM_PROPERTY_MAP``).
SYSTEM_PROPERTY_OF = {
    ZK_SSL_CLIENT_ENABLE: "zookeeper.client.secure",
    ZK_CLIENT_CNXN_SOCKET: "zookeeper.clientCnxnSocket",
    ZK_SSL_KEYSTORE_LOCATION: "zookeeper.ssl.keyStore.location",
    ZK_SSL_KEYSTORE_PASSWORD: "zookeeper.ssl.keyStore.password",
    ZK_SSL_KEYSTORE_TYPE: "zookeeper.ssl.keyStore.type",
    ZK_SSL_TRUSTSTORE_LOCATION: "zookeeper.ssl.trustStore.location",
    ZK_SSL_TRUSTSTORE_PASSWORD: "zookeeper.ssl.trustStore.password",
    ZK_SSL_TRUSTSTORE_TYPE: "zookeeper.ssl.trustStore.type",
    ZK_SSL_PROTOCOL: "zookeeper.ssl.protocol",
    ZK_SSL_ENABLED_PROTOCOLS: "zookeeper.ssl.enabledProtocols",
    ZK_SSL_CIPHER_SUITES: "zookeeper.ssl.ciphersuites",
    ZK_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM: "zookeeper.ssl.hostnameVerification",
    ZK_SSL_CRL_ENABLE: "zookeeper.ssl.crl",
    ZK_SSL_OCSP_ENABLE: "zookeeper.ssl.ocsp",
}

#: ZooKeeper's client socket that speaks TLS.
NETTY_CLIENT_CNXN_SOCKET = "org.apache.zookeeper.ClientCnxnSocketNetty"
#: ZooKeeper's default client socket (plaintext only).
NIO_CLIENT_CNXN_SOCKET = "org.apache.zookeeper.ClientCnxnSocketNIO"
#: Kafka's ``zookeeper.ssl.protocol`` default (``ZkConfigs.ZK_SSL_PROTOCOL``).
DEFAULT_PROTOCOL = "TLSv1.2"
_PROTOCOLS = {"TLSv1.2": ("TLSv1.2",), "TLSv1.3": ("TLSv1.3",), "TLS": ("TLSv1.2", "TLSv1.3")}
#: Store types ZooKeeper detects from a file name (``KeyStoreFileType.fromFilename``).
_TYPE_OF_EXTENSION = {
    ".pem": "PEM",
    ".jks": "JKS",
    ".p12": "PKCS12",
    ".pfx": "PKCS12",
    ".bcfks": "BCFKS",
}
#: Our context errors name the listener property; the ZooKeeper property it came from.
_PROPERTY_OF_LISTENER_PROPERTY = {
    "ssl.keystore.location": ZK_SSL_KEYSTORE_LOCATION,
    "ssl.truststore.location": ZK_SSL_TRUSTSTORE_LOCATION,
    "ssl.cipher.suites": ZK_SSL_CIPHER_SUITES,
}


@dataclass(frozen=True)
class ZkClientTls:
    """The broker's TLS settings for ZooKeeper, resolved (see the module doc).

    Attributes:
        settings: the settings as the listeners' TLS code takes them (keystore with the
            key password, truststore, protocols, cipher suites, host name check).
    """

    settings: SslSettings

    @property
    def client_auth(self) -> bool:
        """Whether the broker presents a certificate (ZooKeeper's ``x509`` authentication)."""
        return self.settings.has_keystore

    def context(self) -> ssl.SSLContext:
        """Build the client-side TLS context.

        Raises:
            ConfigError: an unreadable keystore or truststore, a wrong keystore password,
                unusable cipher suites (naming the ``zookeeper.ssl.*`` property).
        """
        try:
            return client_context(self.settings)
        except TlsConfigError as exc:
            name = _PROPERTY_OF_LISTENER_PROPERTY.get(exc.property_name, exc.property_name)
            raise ConfigError(name, str(exc).split(": ", 1)[-1]) from None

    def handler(self) -> TlsConnectionHandler:
        """Return a new kazoo handler connecting with :meth:`context` (one per client).

        Raises:
            ConfigError: as :meth:`context`.
        """
        return TlsConnectionHandler(self.context())


class TlsConnectionHandler(SequentialThreadingHandler):  # type: ignore[misc]
    """kazoo's threading handler with every connection wrapped in one TLS context.

    kazoo calls :meth:`create_connection` for each connection attempt (sessions and
    four-letter commands); the TLS handshake runs there, within the attempt's timeout. A
    failed handshake is remembered in :attr:`last_tls_error` and raised as the
    ``OSError`` it is, which kazoo treats as a dropped connection and retries.

    Args:
        context: a client-side ``ssl.SSLContext`` (:meth:`ZkClientTls.context`).
    """

    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__()
        self._context = context
        self.last_tls_error: str | None = None

    def create_connection(
        self,
        address: tuple[str, int],
        hostname: str | None = None,
        timeout: float | None = None,
        **_kazoo_tls_options: Any,
    ) -> ssl.SSLSocket:
        """Connect to ``address`` and complete a TLS handshake checking ``hostname``.

        kazoo's own TLS options (``use_ssl``, ``ca``...) are ignored: the context decides.

        Raises:
            OSError: the connection or the handshake failed (``ssl.SSLError``).
        """
        sock = kazoo_utils.create_tcp_connection(socket, address, timeout=timeout)
        try:
            return self._context.wrap_socket(sock, server_hostname=hostname or address[0])
        except ssl.SSLError as exc:
            self.last_tls_error = str(exc)
            sock.close()
            raise
        except OSError as exc:
            self.last_tls_error = f"connection closed during the TLS handshake ({exc})"
            sock.close()
            raise


def _bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigError(name, f"Expected value to be either true or false (got {value!r})")
    return lowered == "true"


class _ZkSslProperties:
    """Broker properties with the ZooKeeper client system properties as fallback."""

    def __init__(self, properties: Mapping[str, str], system: Mapping[str, str]) -> None:
        self._properties = properties
        self._system = system

    def get(self, name: str) -> str | None:
        """Return the broker property, else its system property, else None (stripped)."""
        value = self._properties.get(name)
        if value is None:
            value = self._system.get(SYSTEM_PROPERTY_OF[name])
        return value.strip() if value is not None else None

    def key(self, name: str) -> str:
        """Return the name a value came from, for error messages."""
        if name in self._properties or SYSTEM_PROPERTY_OF[name] not in self._system:
            return name
        return f"{SYSTEM_PROPERTY_OF[name]} (system property)"

    def flag(self, name: str, default: bool) -> bool:
        value = self.get(name)
        if value is None or (name not in self._properties and not value):
            return default
        if name not in self._properties:
            return value.lower() == "true"  # Kafka: a system property other than true is false
        return _bool(name, value)


def _store_type(props: _ZkSslProperties, type_name: str, location: str) -> None:
    """Refuse a store that is not PEM (explicit, or detected from the file name)."""
    kind = props.get(type_name)
    if kind:
        kind = kind.upper()
    else:
        extension = "." + location.rsplit(".", 1)[-1].lower() if "." in location else ""
        kind = _TYPE_OF_EXTENSION.get(extension)
        if kind is None:
            raise ConfigError(
                props.key(type_name),
                f"not set, and the store type cannot be detected from the file name "
                f"{location!r} (set {type_name}=PEM)",
            )
    if kind != "PEM":
        raise ConfigError(
            props.key(type_name),
            f"{kind} stores are not supported for ZooKeeper TLS; use PEM "
            "(a file with the private key and certificate chain, or the CA certificates)",
        )


def resolve_zk_client_tls(
    properties: Mapping[str, str], system_properties: Mapping[str, str]
) -> ZkClientTls | None:
    """Resolve the broker's ZooKeeper TLS settings (Kafka's ``zkClientConfigFromKafkaConfig``).

    Args:
        properties: broker properties.
        system_properties: the JVM system properties of ``KAFKA_OPTS``.

    Returns:
        the settings, or None when ``zookeeper.ssl.client.enable`` is false (every other
        ``zookeeper.ssl.*`` setting is then ignored, as in Kafka).

    Raises:
        ConfigError: TLS without the Netty client socket, a store type other than PEM, an
            unsupported protocol, an endpoint identification algorithm other than HTTPS
            or empty, CRL or OCSP checks turned on, a malformed boolean. The keystore and
            truststore files are read by :meth:`ZkClientTls.context`.
    """
    props = _ZkSslProperties(properties, system_properties)
    if not props.flag(ZK_SSL_CLIENT_ENABLE, False):
        return None
    socket_class = props.get(ZK_CLIENT_CNXN_SOCKET)
    if socket_class != NETTY_CLIENT_CNXN_SOCKET:
        raise ConfigError(
            props.key(ZK_CLIENT_CNXN_SOCKET),
            f"must be {NETTY_CLIENT_CNXN_SOCKET} when {ZK_SSL_CLIENT_ENABLE} is true "
            f"(got {socket_class or 'nothing'}; only the Netty socket speaks TLS)",
        )
    for name, what in ((ZK_SSL_CRL_ENABLE, "revocation lists"), (ZK_SSL_OCSP_ENABLE, "OCSP")):
        if props.flag(name, False):
            raise ConfigError(
                props.key(name), f"certificate {what} are not supported by this broker"
            )
    keystore = props.get(ZK_SSL_KEYSTORE_LOCATION) or None
    truststore = props.get(ZK_SSL_TRUSTSTORE_LOCATION) or None
    if keystore:
        _store_type(props, ZK_SSL_KEYSTORE_TYPE, keystore)
    if truststore:
        _store_type(props, ZK_SSL_TRUSTSTORE_TYPE, truststore)
    protocol = props.get(ZK_SSL_PROTOCOL) or DEFAULT_PROTOCOL
    if protocol not in _PROTOCOLS:
        raise ConfigError(
            props.key(ZK_SSL_PROTOCOL),
            f"{protocol} is not supported (supported: {', '.join(_PROTOCOLS)})",
        )
    enabled_value = props.get(ZK_SSL_ENABLED_PROTOCOLS)
    if enabled_value:
        enabled = tuple(p.strip() for p in enabled_value.split(",") if p.strip())
    else:
        enabled = _PROTOCOLS[protocol]
    unknown = [p for p in enabled if p not in ("TLSv1.2", "TLSv1.3")]
    if unknown:
        raise ConfigError(
            props.key(ZK_SSL_ENABLED_PROTOCOLS),
            f"only TLSv1.2 and TLSv1.3 are supported (got {', '.join(unknown)})",
        )
    suites_value = props.get(ZK_SSL_CIPHER_SUITES)
    suites = tuple(s.strip() for s in (suites_value or "").split(",") if s.strip())
    algorithm_name = ZK_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM
    if algorithm_name in properties:
        algorithm = properties[algorithm_name].strip().lower()
    else:
        verification = system_properties.get(SYSTEM_PROPERTY_OF[algorithm_name])
        algorithm = "https" if verification is None or verification == "true" else ""
    if algorithm not in ("https", ""):
        raise ConfigError(algorithm_name, f"{algorithm!r} is not HTTPS or empty")
    settings = SslSettings(
        keystore_location=keystore,
        key_password=props.get(ZK_SSL_KEYSTORE_PASSWORD) or None,
        truststore_location=truststore,
        enabled_protocols=enabled,
        cipher_suites=suites,
        endpoint_identification=algorithm,
    )
    return ZkClientTls(settings)
