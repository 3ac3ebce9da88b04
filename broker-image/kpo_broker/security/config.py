"""Each listener's security settings, resolved from the broker's properties as Kafka does.

A listener's security protocol comes from ``listener.security.protocol.map``. Its TLS
and SASL properties are looked up first with the listener prefix
``listener.name.<listener name, lower case>.`` and then without it (Kafka's
``KafkaConfig.valuesWithPrefixOverride``); JAAS configurations only with the listener
and mechanism prefix, ``listener.name.<listener>.<mechanism, lower case>.sasl.jaas.config``
(Kafka's ``JaasContext.loadServerContext``; no JAAS file). For ``SASL_SSL`` listeners
``ssl.client.auth`` applies only when listener-prefixed (KIP-684).

TLS properties (PEM only): ``ssl.keystore.type`` (``PEM``; Kafka's default JKS is
refused), ``ssl.keystore.location`` (private key and certificate chain in one file) or
``ssl.keystore.certificate.chain`` / ``ssl.keystore.key`` (inline PEM), ``ssl.key.password``,
``ssl.truststore.type`` (``PEM``), ``ssl.truststore.location`` or
``ssl.truststore.certificates``, ``ssl.client.auth`` (``none``/``requested``/``required``),
``ssl.protocol`` and ``ssl.enabled.protocols`` (``TLSv1.2``, ``TLSv1.3``),
``ssl.cipher.suites``, ``ssl.endpoint.identification.algorithm`` (``https`` or empty, for
the broker's own inter-broker connections) and ``ssl.principal.mapping.rules``.

SASL properties: ``sasl.enabled.mechanisms`` (``PLAIN``, ``SCRAM-SHA-256``,
``SCRAM-SHA-512``; Kafka's default GSSAPI is refused), ``sasl.mechanism.inter.broker.protocol``
(default GSSAPI, refused) and the JAAS configurations: ``PlainLoginModule`` with
``user_<name>="<password>"`` entries (the users PLAIN accepts) and ``ScramLoginModule``
(SCRAM users live in ZooKeeper); on the inter-broker listener the entry of
``sasl.mechanism.inter.broker.protocol`` also carries ``username``/``password``, the
broker's own credentials.

Authorization: ``authorizer.class.name=kafka.security.authorizer.AclAuthorizer`` (Kafka's
ZooKeeper-based authorizer) with ``super.users`` and ``allow.everyone.if.no.acl.found``
(:func:`resolve_authorizer`); any other authorizer class refuses start-up rather than
run unprotected.

TLS to ZooKeeper (``zookeeper.ssl.*``) is resolved in :mod:`kpo_broker.zk.tls`.

Anything set that cannot be honoured refuses start-up with a :class:`ConfigError`
naming the property (never quoting a JAAS value, which holds passwords).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kpo_broker.config import BrokerConfig, ConfigError
from kpo_broker.security.authorizer import AUTHORIZER_CLASS, parse_super_users
from kpo_broker.security.principal import SslPrincipalMapper
from kpo_broker.security.scram import MECHANISMS as SCRAM_MECHANISMS
from kpo_kafka.security import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasEntry,
    JaasError,
    SecurityProtocol,
    parse_jaas_config,
)

__all__ = [
    "SUPPORTED_MECHANISMS",
    "AuthorizerSettings",
    "ClientSecurity",
    "ListenerSecurity",
    "SaslSettings",
    "SslSettings",
    "inter_broker_client_security",
    "resolve_authorizer",
    "resolve_listener_security",
]

#: SASL mechanisms the broker implements.
SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
_TLS_PROTOCOLS = ("TLSv1.2", "TLSv1.3")
_CLIENT_AUTH = ("none", "requested", "required")
#: Properties whose only meaningful values are Kafka's defaults here: set, they refuse start-up.
_UNSUPPORTED_IF_SET = (
    "ssl.engine.factory.class",
    "ssl.provider",
    "sasl.server.callback.handler.class",
    "sasl.login.class",
    "sasl.login.callback.handler.class",
    "principal.builder.class",
)
#: Boolean properties that may not be true (none left: ZooKeeper TLS and znode ACLs are
#: in :mod:`kpo_broker.zk.tls` and :mod:`kpo_broker.zk.security`).
_UNSUPPORTED_IF_TRUE: tuple[str, ...] = ()


@dataclass(frozen=True)
class SslSettings:
    """One listener's (or the inter-broker client's) TLS settings.

    Attributes:
        keystore_location: PEM file with the private key and certificate chain.
        keystore_certificate_chain: inline PEM certificate chain.
        keystore_key: inline PEM private key.
        key_password: the private key's password, if it is encrypted.
        truststore_location: PEM file of trusted CA certificates.
        truststore_certificates: inline PEM CA certificates.
        client_auth: ``none``, ``requested`` or ``required``.
        enabled_protocols: among ``TLSv1.2``, ``TLSv1.3``.
        cipher_suites: cipher suite names; empty = the TLS library's defaults.
        endpoint_identification: ``https`` (verify the server's host name) or ``""``.
        principal_mapping_rules: ``ssl.principal.mapping.rules``.
    """

    keystore_location: str | None = None
    keystore_certificate_chain: str | None = None
    keystore_key: str | None = None
    key_password: str | None = None
    truststore_location: str | None = None
    truststore_certificates: str | None = None
    client_auth: str = "none"
    enabled_protocols: tuple[str, ...] = _TLS_PROTOCOLS
    cipher_suites: tuple[str, ...] = ()
    endpoint_identification: str = "https"
    principal_mapping_rules: str = "DEFAULT"

    @property
    def has_keystore(self) -> bool:
        """Whether a private key and certificate are configured."""
        return bool(self.keystore_location or self.keystore_certificate_chain)


@dataclass(frozen=True)
class SaslSettings:
    """One listener's SASL settings.

    Attributes:
        enabled_mechanisms: the mechanisms the listener accepts, in configured order.
        jaas: mechanism -> its login module entry.
    """

    enabled_mechanisms: tuple[str, ...]
    jaas: Mapping[str, JaasEntry] = field(default_factory=dict)

    @property
    def plain_users(self) -> dict[str, str]:
        """User name -> password from the PLAIN entry's ``user_<name>`` options."""
        entry = self.jaas.get("PLAIN")
        if entry is None:
            return {}
        return {k[5:]: v for k, v in entry.options.items() if k.startswith("user_") and k[5:]}


@dataclass(frozen=True)
class ListenerSecurity:
    """The security of one listener.

    Attributes:
        name: the listener name.
        protocol: its security protocol.
        ssl: TLS settings (SSL and SASL_SSL), else None.
        sasl: SASL settings (SASL_PLAINTEXT and SASL_SSL), else None.
        principal_mapper: maps client certificate DNs to principal names.
    """

    name: str
    protocol: SecurityProtocol
    ssl: SslSettings | None = None
    sasl: SaslSettings | None = None
    principal_mapper: SslPrincipalMapper = field(default_factory=SslPrincipalMapper)


@dataclass(frozen=True)
class ClientSecurity:
    """How this broker connects to other brokers' inter-broker listener.

    Attributes:
        protocol: the inter-broker listener's security protocol.
        ssl: TLS settings (the broker's keystore gives its client certificate).
        sasl_mechanism: ``sasl.mechanism.inter.broker.protocol`` for SASL protocols.
        username: the JAAS ``username`` for SASL.
        password: the JAAS ``password`` for SASL.
    """

    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    ssl: SslSettings | None = None
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)


class _Properties:
    """Property lookup with Kafka's listener-prefix override."""

    def __init__(self, config: BrokerConfig) -> None:
        self._values = dict(config.extra)

    def get(self, name: str, listener: str | None = None) -> str | None:
        if listener is not None:
            value = self._values.get(f"listener.name.{listener.lower()}.{name}")
            if value is not None:
                return value.strip()
        value = self._values.get(name)
        return value.strip() if value is not None else None

    def prefixed(self, name: str, listener: str) -> str | None:
        value = self._values.get(f"listener.name.{listener.lower()}.{name}")
        return value.strip() if value is not None else None

    def key(self, name: str, listener: str | None = None) -> str:
        """Return the property name a value came from (for error messages)."""
        if listener is not None and f"listener.name.{listener.lower()}.{name}" in self._values:
            return f"listener.name.{listener.lower()}.{name}"
        return name


def _list(value: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    if value is None:
        return default
    return tuple(part.strip() for part in value.split(",") if part.strip())


def _ssl_settings(props: _Properties, listener: str, protocol: SecurityProtocol) -> SslSettings:
    def get(name: str) -> str | None:
        value = props.get(name, listener)
        return value if value else None

    for name, default in (("ssl.keystore.type", "JKS"), ("ssl.truststore.type", "JKS")):
        kind = (get(name) or default).upper()
        wanted_store = name.split(".")[1]
        configured = any(
            get(f"ssl.{wanted_store}.{suffix}")
            for suffix in (
                ("location", "certificate.chain", "key")
                if wanted_store == "keystore"
                else ("location", "certificates")
            )
        )
        if configured and kind != "PEM":
            raise ConfigError(
                props.key(name, listener), f"{kind} stores are not supported; use PEM"
            )
    location = get("ssl.keystore.location")
    chain, key = get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
    if location and (chain or key):
        raise ConfigError(
            props.key("ssl.keystore.location", listener),
            "set either a location or ssl.keystore.certificate.chain/ssl.keystore.key",
        )
    if bool(chain) != bool(key):
        raise ConfigError(
            props.key("ssl.keystore.key", listener),
            "ssl.keystore.certificate.chain and ssl.keystore.key go together",
        )
    if get("ssl.truststore.location") and get("ssl.truststore.certificates"):
        raise ConfigError(
            props.key("ssl.truststore.location", listener),
            "set either a location or ssl.truststore.certificates",
        )
    if protocol is SecurityProtocol.SASL_SSL:
        client_auth = (props.prefixed("ssl.client.auth", listener) or "none").lower()
    else:
        client_auth = (get("ssl.client.auth") or "none").lower()
    if client_auth not in _CLIENT_AUTH:
        raise ConfigError(
            props.key("ssl.client.auth", listener), f"{client_auth!r} is not one of {_CLIENT_AUTH}"
        )
    enabled = _list(props.get("ssl.enabled.protocols", listener), _TLS_PROTOCOLS)
    unknown = [p for p in enabled if p not in _TLS_PROTOCOLS]
    if unknown or not enabled:
        raise ConfigError(
            props.key("ssl.enabled.protocols", listener),
            f"only {', '.join(_TLS_PROTOCOLS)} are supported (got {', '.join(enabled) or 'none'})",
        )
    ssl_protocol = get("ssl.protocol") or "TLSv1.3"
    if ssl_protocol not in (*_TLS_PROTOCOLS, "TLS"):
        raise ConfigError(props.key("ssl.protocol", listener), f"{ssl_protocol} is not supported")
    algorithm = props.get("ssl.endpoint.identification.algorithm", listener)
    algorithm = "https" if algorithm is None else algorithm.lower()
    if algorithm not in ("https", ""):
        raise ConfigError(
            props.key("ssl.endpoint.identification.algorithm", listener),
            f"{algorithm!r} is not https or empty",
        )
    return SslSettings(
        keystore_location=location,
        keystore_certificate_chain=chain,
        keystore_key=key,
        key_password=get("ssl.key.password"),
        truststore_location=get("ssl.truststore.location"),
        truststore_certificates=get("ssl.truststore.certificates"),
        client_auth=client_auth,
        enabled_protocols=enabled,
        cipher_suites=_list(get("ssl.cipher.suites"), ()),
        endpoint_identification=algorithm,
        principal_mapping_rules=get("ssl.principal.mapping.rules") or "DEFAULT",
    )


def _sasl_settings(props: _Properties, listener: str) -> SaslSettings:
    key = props.key("sasl.enabled.mechanisms", listener)
    mechanisms = _list(props.get("sasl.enabled.mechanisms", listener), ("GSSAPI",))
    mechanisms = tuple(m.upper() for m in mechanisms)
    if not mechanisms:
        raise ConfigError(key, f"no SASL mechanism enabled for listener {listener}")
    unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unsupported:
        raise ConfigError(
            key,
            f"SASL mechanism {', '.join(unsupported)} of listener {listener} is not supported "
            f"(supported: {', '.join(SUPPORTED_MECHANISMS)})",
        )
    jaas: dict[str, JaasEntry] = {}
    for mechanism in mechanisms:
        name = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        value = props.prefixed(f"{mechanism.lower()}.sasl.jaas.config", listener)
        if value is None:
            raise ConfigError(
                name,
                f"no JAAS configuration for mechanism {mechanism} of listener {listener} "
                "(a JAAS file is not supported)",
            )
        try:
            entries = parse_jaas_config(value)
        except JaasError as exc:
            raise ConfigError(name, f"invalid JAAS configuration: {exc}") from None
        if len(entries) != 1:
            raise ConfigError(name, "must contain exactly one login module")
        wanted = PLAIN_LOGIN_MODULE if mechanism == "PLAIN" else SCRAM_LOGIN_MODULE
        if entries[0].login_module != wanted:
            raise ConfigError(name, f"mechanism {mechanism} needs login module {wanted}")
        jaas[mechanism] = entries[0]
    return SaslSettings(mechanisms, jaas)


def resolve_listener_security(config: BrokerConfig) -> dict[str, ListenerSecurity]:
    """Resolve the security of every listener in ``listeners``.

    Returns:
        listener name -> its security.

    Raises:
        ConfigError: an unsupported protocol, mechanism or store type, a missing JAAS
            configuration, a malformed value, an unusable inter-broker setting.
    """
    props = _Properties(config)
    for name in _UNSUPPORTED_IF_SET:
        if props.get(name):
            raise ConfigError(name, "is not supported by this broker")
    for name in _UNSUPPORTED_IF_TRUE:
        if (props.get(name) or "false").lower() == "true":
            raise ConfigError(name, "is not supported by this broker (must be false)")
    reauth = props.get("connections.max.reauth.ms")
    if reauth not in (None, "", "0"):
        raise ConfigError(
            "connections.max.reauth.ms", "re-authentication (KIP-368) is not supported"
        )
    if (
        config.inter_broker_listener_name is not None
        and "security_inter_broker_protocol" in config.model_fields_set
    ):
        raise ConfigError(
            "inter.broker.listener.name",
            "Only one of inter.broker.listener.name and security.inter.broker.protocol "
            "should be set.",
        )
    result: dict[str, ListenerSecurity] = {}
    for endpoint in config.listeners:
        protocol = endpoint.security_protocol
        ssl = None
        sasl = None
        if protocol in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL):
            ssl = _ssl_settings(props, endpoint.name, protocol)
            if not ssl.has_keystore:
                raise ConfigError(
                    props.key("ssl.keystore.location", endpoint.name),
                    f"listener {endpoint.name} ({protocol}) needs a keystore",
                )
        if protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL):
            sasl = _sasl_settings(props, endpoint.name)
        rules = props.get("ssl.principal.mapping.rules", endpoint.name) or "DEFAULT"
        try:
            mapper = SslPrincipalMapper(rules)
        except ValueError as exc:
            raise ConfigError(
                props.key("ssl.principal.mapping.rules", endpoint.name), str(exc)
            ) from None
        result[endpoint.name] = ListenerSecurity(endpoint.name, protocol, ssl, sasl, mapper)
    return result


def inter_broker_client_security(
    config: BrokerConfig, listeners: Mapping[str, ListenerSecurity]
) -> ClientSecurity:
    """Return the settings of this broker's connections to other brokers' inter-broker listener.

    TLS uses the inter-broker listener's keystore (the client certificate of mutual TLS)
    and truststore; SASL uses ``sasl.mechanism.inter.broker.protocol`` (which the listener
    must enable) with the ``username``/``password`` of that mechanism's JAAS entry.

    Raises:
        ConfigError: the mechanism is not enabled or the JAAS entry lacks credentials.
    """
    props = _Properties(config)
    name = config.inter_broker_listener
    security = listeners.get(name)
    if security is None:
        endpoint = config.inter_broker_endpoint
        protocol = endpoint.security_protocol if endpoint else SecurityProtocol.PLAINTEXT
        ssl = (
            _ssl_settings(props, name, protocol)
            if protocol in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)
            else None
        )
        sasl = (
            _sasl_settings(props, name)
            if protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)
            else None
        )
        security = ListenerSecurity(name, protocol, ssl, sasl)
    if security.sasl is None:
        return ClientSecurity(security.protocol, security.ssl)
    mechanism = (props.get("sasl.mechanism.inter.broker.protocol") or "GSSAPI").upper()
    if mechanism not in security.sasl.enabled_mechanisms:
        raise ConfigError(
            "sasl.mechanism.inter.broker.protocol",
            f"{mechanism} must be included in sasl.enabled.mechanisms of listener {name} "
            "when SASL is used for inter-broker communication",
        )
    options = security.sasl.jaas[mechanism].options
    if not options.get("username") or not options.get("password"):
        raise ConfigError(
            f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config",
            "the inter-broker listener's JAAS entry needs username and password",
        )
    return ClientSecurity(
        security.protocol, security.ssl, mechanism, options["username"], options["password"]
    )


@dataclass(frozen=True)
class AuthorizerSettings:
    """The ACL authorizer's settings (Kafka's ``AclAuthorizer.configure``).

    Attributes:
        super_users: principals allowed everything (``super.users``, ``;``-separated).
        allow_everyone_if_no_acl_found: ``allow.everyone.if.no.acl.found`` (default false).
    """

    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False


def resolve_authorizer(config: BrokerConfig) -> AuthorizerSettings | None:
    """Return the authorizer's settings, or None when ``authorizer.class.name`` is unset.

    Raises:
        ConfigError: another authorizer class (only Kafka's ZooKeeper-based
            ``kafka.security.authorizer.AclAuthorizer`` is implemented), a ``super.users``
            entry that is not ``<type>:<name>``, or a non-boolean
            ``allow.everyone.if.no.acl.found``.
    """
    props = _Properties(config)
    name = props.get("authorizer.class.name")
    if not name:
        return None
    if name != AUTHORIZER_CLASS:
        raise ConfigError(
            "authorizer.class.name",
            f"{name} is not supported by this broker (only {AUTHORIZER_CLASS}, "
            "Kafka's ZooKeeper-based authorizer)",
        )
    try:
        super_users = parse_super_users(props.get("super.users"))
    except ValueError as exc:
        raise ConfigError("super.users", str(exc)) from None
    allow = (props.get("allow.everyone.if.no.acl.found") or "false").lower()
    if allow not in ("true", "false"):
        raise ConfigError("allow.everyone.if.no.acl.found", f"{allow!r} is not true or false")
    return AuthorizerSettings(super_users, allow == "true")
