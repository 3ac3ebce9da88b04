"""Kafka client security settings, read with Kafka's client property names (pure parsing).

Kafka's tools take a ``--command-config`` properties file; the operator, the placement
job and ``kpo-reassign`` read the same names (``CommonClientConfigs``, ``SslConfigs``,
``SaslConfigs``) and translate them to kafka-python's ``KafkaAdminClient`` /
``KafkaConsumer`` keyword arguments (:meth:`ClientSecurity.kafka_python_kwargs`):

======================================== ==================================================
property                                 accepted values
======================================== ==================================================
``security.protocol``                    ``PLAINTEXT`` (default), ``SSL``,
                                         ``SASL_PLAINTEXT``, ``SASL_SSL``
``ssl.truststore.type``                  ``PEM`` (Kafka's default ``JKS`` is refused)
``ssl.truststore.location``              file of PEM CA certificates
``ssl.truststore.certificates``          the PEM CA certificates themselves
``ssl.keystore.type``                    ``PEM``
``ssl.keystore.location``                file with the client's PEM private key and chain
``ssl.keystore.certificate.chain``       the client's PEM certificate chain (mutual TLS)
``ssl.keystore.key``                     its PEM private key (PKCS#8, encrypted with
                                         ``ssl.key.password`` if that is set)
``ssl.key.password``                     password of the private key
``ssl.endpoint.identification.algorithm`` ``https`` (default: the broker certificate must
                                         name the host), empty: no host-name check
``sasl.mechanism``                       ``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512``
                                         (Kafka's default ``GSSAPI`` is refused)
``sasl.jaas.config``                     ``...PlainLoginModule required username="u"
                                         password="p";`` or the same with ScramLoginModule
======================================== ==================================================

Anything else is refused with :class:`ClientConfigError` naming the property, as are the
combinations Kafka's ``DefaultSslEngineFactory`` refuses (a store password with PEM, a
location and inline certificates together...): a setting that is accepted is applied.
Username and password may also come outside ``sasl.jaas.config`` (from files or the
environment, :func:`client_security_from_env`), so that Kubernetes Secrets never end up in
a properties file. Secret values are :class:`Secret` (``***`` in ``repr`` and ``str``) and
never appear in error messages.
"""

from __future__ import annotations

import functools
import os
import re
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

__all__ = [
    "ENV_PREFIX",
    "SUPPORTED_PROPERTIES",
    "ClientConfigError",
    "ClientSecurity",
    "SaslMechanism",
    "Secret",
    "SecurityProtocol",
    "client_security_from_env",
    "parse_jaas_config",
    "read_properties",
]

ENV_PREFIX = "KPO_KAFKA_"
"""Prefix of the environment variables read by :func:`client_security_from_env`."""


class ClientConfigError(ValueError):
    """A client security setting is unknown, unsupported or inconsistent.

    The message names the property (or variable) and never contains a secret value.
    """


class SecurityProtocol(StrEnum):
    """Kafka's ``security.protocol`` values (``SecurityProtocol``)."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        """Whether connections are wrapped in TLS (``SSL``, ``SASL_SSL``)."""
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        """Whether the client authenticates with SASL (``SASL_PLAINTEXT``, ``SASL_SSL``)."""
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


class SaslMechanism(StrEnum):
    """The ``sasl.mechanism`` values supported (Kafka's PLAIN, KIP-84 SCRAM)."""

    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"


class Secret:
    """A secret string: shown as ``***`` by ``str`` and ``repr``; :meth:`reveal` gives it.

    Args:
        value: the secret.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """Return the secret value (only to hand it to the Kafka client)."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    def __str__(self) -> str:
        return "***"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


SUPPORTED_PROPERTIES = (
    "security.protocol",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.truststore.password",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "sasl.mechanism",
    "sasl.jaas.config",
)
"""Property names read (``ssl.*.password`` only to refuse them as Kafka does with PEM)."""

SECRET_PROPERTIES = frozenset(
    {
        "ssl.truststore.password",
        "ssl.keystore.key",
        "ssl.keystore.password",
        "ssl.key.password",
        "sasl.jaas.config",
    }
)
"""Properties whose values are secrets (Kafka's ``Type.PASSWORD`` configs)."""

_PEM = "PEM"
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_JAAS_ENTRY = re.compile(r"^\s*([A-Za-z_$][\w.$]*)\s+(\w+)\s*(.*?)\s*;\s*$", re.DOTALL)
_JAAS_OPTION = re.compile(r'\s*([\w.\-$]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s"=;]+))\s*', re.DOTALL)


def parse_jaas_config(text: str) -> dict[str, str]:
    r"""Parse ``sasl.jaas.config``: one login module entry, return its options.

    Follows Kafka's ``JaasConfig``: ``<LoginModule class> <flag> [key=value ...];`` with
    exactly one entry for a client; values are double-quoted (``\"`` escapes a quote) or
    bare words. Only ``PlainLoginModule`` and ``ScramLoginModule`` are accepted, with the
    options ``username`` and ``password`` (and ``tokenauth=false`` for SCRAM).

    Returns:
        ``{"username": ..., "password": ...}``.

    Raises:
        ClientConfigError: malformed, another login module, a second entry, an unknown
            option or a missing username/password (the value itself is never echoed).
    """
    match = _JAAS_ENTRY.match(text)
    if match is None:
        raise ClientConfigError(
            "sasl.jaas.config: expected one entry '<LoginModule> required "
            'username="..." password="...";\''
        )
    module, flag, rest = match.groups()
    if module not in (_PLAIN_MODULE, _SCRAM_MODULE):
        raise ClientConfigError(
            f"sasl.jaas.config: login module {module} is not supported "
            f"(use {_PLAIN_MODULE} or {_SCRAM_MODULE})"
        )
    if flag.lower() not in _FLAGS:
        raise ClientConfigError(
            f"sasl.jaas.config: control flag {flag!r} is not one of {', '.join(_FLAGS)}"
        )
    options: dict[str, str] = {}
    position = 0
    while position < len(rest):
        option = _JAAS_OPTION.match(rest, position)
        if option is None or option.end() == position:
            raise ClientConfigError(
                "sasl.jaas.config: malformed options after the control flag "
                '(expected key="value" pairs)'
            )
        key, quoted, bare = option.groups()
        if key in options:
            raise ClientConfigError(f"sasl.jaas.config: option {key} given twice")
        options[key] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
        position = option.end()
    known = {"username", "password"}
    if module == _SCRAM_MODULE:
        known.add("tokenauth")
        if options.get("tokenauth", "false").lower() != "false":
            raise ClientConfigError(
                "sasl.jaas.config: tokenauth (delegation tokens) is not supported"
            )
    unknown = sorted(set(options) - known)
    if unknown:
        raise ClientConfigError(f"sasl.jaas.config: unknown option(s) {', '.join(unknown)}")
    for needed in ("username", "password"):
        if not options.get(needed):
            raise ClientConfigError(f"sasl.jaas.config: no {needed}")
    return {"username": options["username"], "password": options["password"]}


@dataclass(frozen=True)
class ClientSecurity:
    """How a Kafka client connects: protocol, TLS material and SASL credentials.

    Build it with :meth:`from_properties` (Kafka's names) or :func:`client_security_from_env`.

    Attributes:
        protocol: ``security.protocol``.
        ca_certificates: PEM CA certificates to trust; ``None`` trusts the system's CAs.
        certificate_chain: the client's PEM certificate chain for mutual TLS.
        private_key: its PEM private key.
        key_password: the private key's password (encrypted keys).
        check_hostname: verify that the broker certificate names the host
            (``ssl.endpoint.identification.algorithm=https``).
        sasl_mechanism: the SASL mechanism (SASL protocols only).
        username: the SASL user name.
        password: the SASL password.
    """

    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    ca_certificates: str | None = None
    certificate_chain: str | None = None
    private_key: Secret | None = field(default=None, repr=False)
    key_password: Secret | None = field(default=None, repr=False)
    check_hostname: bool = True
    sasl_mechanism: SaslMechanism | None = None
    username: str | None = None
    password: Secret | None = field(default=None, repr=False)

    @classmethod
    def from_properties(
        cls,
        properties: Mapping[str, str],
        *,
        username: str | None = None,
        password: Secret | None = None,
        base_dir: Path | None = None,
    ) -> ClientSecurity:
        """Read Kafka client properties (a ``--command-config`` file's content).

        Args:
            properties: property name -> value (blank values count as unset, as Kafka's).
            username: SASL user name given outside ``sasl.jaas.config``.
            password: SASL password given outside ``sasl.jaas.config``.
            base_dir: folder relative ``*.location`` paths are read from (default: cwd).

        Raises:
            ClientConfigError: an unknown property, an unsupported value, a missing or
                unreadable file, or a combination Kafka refuses; the message names it.
        """
        props = {k: v.strip() for k, v in properties.items()}
        unknown = sorted(set(props) - set(SUPPORTED_PROPERTIES))
        if unknown:
            raise ClientConfigError(
                f"unknown or unsupported client properties: {', '.join(unknown)} "
                f"(supported: {', '.join(SUPPORTED_PROPERTIES)})"
            )
        raw_protocol = props.get("security.protocol") or SecurityProtocol.PLAINTEXT.value
        try:
            protocol = SecurityProtocol(raw_protocol.upper())
        except ValueError:
            raise ClientConfigError(
                f"security.protocol: {raw_protocol!r} is not one of "
                f"{', '.join(p.value for p in SecurityProtocol)}"
            ) from None
        tls = _tls_settings(props, base_dir) if protocol.uses_tls else {}
        if not protocol.uses_tls:
            _refuse_unused(props, "ssl.", protocol)
        sasl = (
            _sasl_settings(props, username, password)
            if protocol.uses_sasl
            else _refuse_unused(props, "sasl.", protocol)
        )
        if not protocol.uses_sasl and (username is not None or password is not None):
            raise ClientConfigError(
                f"a SASL username/password is given but security.protocol is {protocol.value}"
            )
        security = cls(protocol=protocol, **tls, **sasl)
        if protocol.uses_tls:
            security.ssl_context()  # load the certificates now: a bad file fails at start
        return security

    def ssl_context(self) -> ssl.SSLContext | None:
        """Return the TLS context of TLS protocols (built once), ``None`` otherwise.

        TLS 1.2 or later, the broker certificate verified against :attr:`ca_certificates`
        (or the system's CAs) and, with :attr:`check_hostname`, its host name.

        Raises:
            ClientConfigError: a certificate or key cannot be loaded.
        """
        if not self.protocol.uses_tls:
            return None
        return _context(self)

    def kafka_python_kwargs(self) -> dict[str, Any]:
        """Return the keyword arguments for kafka-python's clients.

        ``security_protocol``, and ``ssl_context`` / ``ssl_check_hostname`` for TLS,
        ``sasl_mechanism`` / ``sasl_plain_username`` / ``sasl_plain_password`` for SASL.
        """
        kwargs: dict[str, Any] = {"security_protocol": self.protocol.value}
        if self.protocol.uses_tls:
            kwargs["ssl_context"] = self.ssl_context()
            kwargs["ssl_check_hostname"] = self.check_hostname
        if self.protocol.uses_sasl:
            assert self.sasl_mechanism is not None and self.password is not None
            kwargs["sasl_mechanism"] = self.sasl_mechanism.value
            kwargs["sasl_plain_username"] = self.username
            kwargs["sasl_plain_password"] = self.password.reveal()
        return kwargs

    def describe(self) -> str:
        """One line for logs, without secrets, e.g. ``SASL_SSL, SCRAM-SHA-512 as kpo``."""
        parts = [self.protocol.value]
        if self.protocol.uses_sasl:
            parts.append(f"{self.sasl_mechanism} as {self.username}")
        if self.protocol.uses_tls:
            parts.append("client certificate" if self.certificate_chain else "no client cert")
            if not self.check_hostname:
                parts.append("no host-name check")
        return ", ".join(parts)


@functools.lru_cache(maxsize=16)
def _context(security: ClientSecurity) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = security.check_hostname
    context.verify_mode = ssl.CERT_REQUIRED
    try:
        if security.ca_certificates is not None:
            context.load_verify_locations(cadata=security.ca_certificates)
        else:
            context.load_default_certs()
    except ssl.SSLError as exc:
        raise ClientConfigError(
            f"ssl.truststore: the PEM CA certificates cannot be loaded ({exc.reason})"
        ) from None
    if security.certificate_chain is not None and security.private_key is not None:
        _load_chain(context, security)
    return context


def _load_chain(context: ssl.SSLContext, security: ClientSecurity) -> None:
    """Load the client chain and key (Python's ssl reads them only from files)."""
    assert security.certificate_chain is not None and security.private_key is not None
    with tempfile.TemporaryDirectory(prefix="kpo-tls-") as folder:
        path = Path(folder) / "client.pem"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(security.private_key.reveal().strip() + "\n")
            out.write(security.certificate_chain.strip() + "\n")
        password = security.key_password.reveal() if security.key_password else None
        try:
            context.load_cert_chain(str(path), password=password)
        except (ssl.SSLError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or type(exc).__name__
            raise ClientConfigError(
                "ssl.keystore: the client certificate chain and private key cannot be loaded "
                f"(not PEM, not matching, or a wrong ssl.key.password: {reason})"
            ) from None


def _read(path_text: str, name: str, base_dir: Path | None) -> str:
    path = Path(path_text)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    try:
        return path.read_text()
    except OSError as exc:
        raise ClientConfigError(f"{name}: cannot read {path}: {exc.strerror}") from None


def _pem_type(props: Mapping[str, str], name: str, used: bool) -> None:
    value = props.get(name)
    if not used and not value:
        return
    if (value or "JKS").upper() != _PEM:
        raise ClientConfigError(
            f"{name}: {value or 'JKS (Kafka default)'} is not supported; set {name}=PEM"
        )


def _tls_settings(props: Mapping[str, str], base_dir: Path | None) -> dict[str, Any]:
    """Truststore, keystore and host-name check, with DefaultSslEngineFactory's rules."""
    location = props.get("ssl.truststore.location")
    inline = props.get("ssl.truststore.certificates")
    _pem_type(props, "ssl.truststore.type", bool(location or inline))
    if location and inline:
        raise ClientConfigError(
            "ssl.truststore.location and ssl.truststore.certificates are both set; give one"
        )
    if props.get("ssl.truststore.password"):
        raise ClientConfigError("ssl.truststore.password cannot be specified for PEM format")
    ca = (
        _read(location, "ssl.truststore.location", base_dir).strip() if location else inline or None
    )
    if ca is not None and "-----BEGIN CERTIFICATE-----" not in ca:
        where = "ssl.truststore.location" if location else "ssl.truststore.certificates"
        raise ClientConfigError(f"{where}: no PEM certificate (-----BEGIN CERTIFICATE-----)")
    key_location = props.get("ssl.keystore.location")
    chain = props.get("ssl.keystore.certificate.chain")
    key = props.get("ssl.keystore.key")
    _pem_type(props, "ssl.keystore.type", bool(key_location or chain or key))
    if props.get("ssl.keystore.password"):
        raise ClientConfigError(
            "ssl.keystore.password cannot be specified with PEM format, only ssl.key.password"
        )
    if key_location and (chain or key):
        raise ClientConfigError(
            "ssl.keystore.location and ssl.keystore.key/certificate.chain are both set; give one"
        )
    if key_location:
        chain = key = _read(key_location, "ssl.keystore.location", base_dir).strip()
    elif bool(chain) != bool(key):
        missing = "ssl.keystore.key" if chain else "ssl.keystore.certificate.chain"
        raise ClientConfigError(f"{missing} is missing (mutual TLS needs the chain and the key)")
    if props.get("ssl.key.password") and not key:
        raise ClientConfigError("ssl.key.password is set without a keystore")
    if chain is not None and "-----BEGIN CERTIFICATE-----" not in chain:
        raise ClientConfigError("ssl.keystore: no PEM certificate (-----BEGIN CERTIFICATE-----)")
    if key is not None and "PRIVATE KEY-----" not in key:
        raise ClientConfigError("ssl.keystore: no PEM private key (-----BEGIN PRIVATE KEY-----)")
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https")
    if algorithm.lower() not in ("https", ""):
        raise ClientConfigError(
            f"ssl.endpoint.identification.algorithm: {algorithm!r} is not supported "
            "(https, or empty to disable the host-name check)"
        )
    password = props.get("ssl.key.password")
    return {
        "ca_certificates": ca,
        "certificate_chain": chain,
        "private_key": Secret(key) if key else None,
        "key_password": Secret(password) if password else None,
        "check_hostname": algorithm.lower() == "https",
    }


def _sasl_settings(
    props: Mapping[str, str], username: str | None, password: Secret | None
) -> dict[str, Any]:
    raw = props.get("sasl.mechanism") or "GSSAPI"
    try:
        mechanism = SaslMechanism(raw.upper())
    except ValueError:
        default = " (Kafka's default)" if "sasl.mechanism" not in props else ""
        raise ClientConfigError(
            f"sasl.mechanism: {raw}{default} is not supported "
            f"(use {', '.join(m.value for m in SaslMechanism)})"
        ) from None
    jaas = props.get("sasl.jaas.config")
    if jaas:
        if username is not None or password is not None:
            raise ClientConfigError(
                "sasl.jaas.config and a separate SASL username/password are both given; give one"
            )
        options = parse_jaas_config(jaas)
        username, password = options["username"], Secret(options["password"])
    if not username:
        raise ClientConfigError(
            f"security.protocol {props.get('security.protocol')} needs a SASL username "
            "(sasl.jaas.config or the username setting)"
        )
    if password is None or not password.reveal():
        raise ClientConfigError(
            f"security.protocol {props.get('security.protocol')} needs a SASL password "
            "(sasl.jaas.config or the password setting)"
        )
    return {"sasl_mechanism": mechanism, "username": username, "password": password}


def _refuse_unused(
    props: Mapping[str, str], prefix: str, protocol: SecurityProtocol
) -> dict[str, Any]:
    unused = sorted(k for k, v in props.items() if k.startswith(prefix) and v)
    if unused:
        raise ClientConfigError(
            f"{', '.join(unused)} set but security.protocol {protocol.value} does not use "
            f"{'TLS' if prefix == 'ssl.' else 'SASL'}"
        )
    return {}


def read_properties(path: Path) -> dict[str, str]:
    """Read a Java properties file (Kafka's ``--command-config`` format) with jproperties.

    Raises:
        ClientConfigError: the file cannot be read or parsed.
    """
    from jproperties import Properties

    loaded = Properties()
    try:
        with path.open("rb") as source:
            loaded.load(source, "utf-8")
    except OSError as exc:
        raise ClientConfigError(f"cannot read {path}: {exc.strerror}") from None
    except Exception as exc:  # jproperties' parse errors have no common base
        raise ClientConfigError(
            f"cannot parse {path} as a properties file: {type(exc).__name__}"
        ) from None
    return {str(k): str(v.data) for k, v in loaded.items()}


def _env_name(prop: str) -> str:
    return ENV_PREFIX + prop.upper().replace(".", "_").replace("-", "_")


def client_security_from_env(
    environ: Mapping[str, str] | None = None, command_config: Path | None = None
) -> ClientSecurity:
    """Read the client security settings from a properties file and ``KPO_KAFKA_*`` variables.

    Sources, later ones winning per property:

    1. ``command_config``, else the file named by ``KPO_KAFKA_CLIENT_CONFIG`` (Kafka's
       ``--command-config`` format);
    2. ``KPO_KAFKA_<PROPERTY>`` for each supported property, dots as underscores
       (``KPO_KAFKA_SECURITY_PROTOCOL=SASL_SSL``), as Kafka's images map ``KAFKA_*``;
    3. ``KPO_KAFKA_<PROPERTY>_FILE``: the property's value is that file's content (e.g.
       ``KPO_KAFKA_SSL_KEYSTORE_KEY_FILE=/etc/kpo/kafka/tls.key``, a mounted Secret).

    The SASL credentials may also be given as ``KPO_KAFKA_SASL_USERNAME`` /
    ``KPO_KAFKA_SASL_PASSWORD`` or their ``_FILE`` variants (instead of
    ``sasl.jaas.config``). Variables not listed here are ignored (Kubernetes adds
    ``<SERVICE>_PORT``-style variables to every pod).

    Raises:
        ClientConfigError: as :meth:`ClientSecurity.from_properties`, or a variable's file
            cannot be read; the message names the variable or property.
    """
    env = os.environ if environ is None else environ
    properties: dict[str, str] = {}
    base_dir: Path | None = None
    config = command_config or (
        Path(env[ENV_PREFIX + "CLIENT_CONFIG"]) if env.get(ENV_PREFIX + "CLIENT_CONFIG") else None
    )
    if config is not None:
        properties.update(read_properties(config))
        base_dir = config.parent
    for prop in SUPPORTED_PROPERTIES:
        name = _env_name(prop)
        if env.get(name + "_FILE"):
            properties[prop] = _read(env[name + "_FILE"], name + "_FILE", None)
        elif name in env:
            properties[prop] = env[name]
    username = _env_value(env, ENV_PREFIX + "SASL_USERNAME")
    secret = _env_value(env, ENV_PREFIX + "SASL_PASSWORD")
    return ClientSecurity.from_properties(
        properties,
        username=username.strip() if username is not None else None,
        password=Secret(secret.rstrip("\r\n")) if secret is not None else None,
        base_dir=base_dir,
    )


def _env_value(env: Mapping[str, str], name: str) -> str | None:
    if env.get(name + "_FILE"):
        return _read(env[name + "_FILE"], name + "_FILE", None)
    return env.get(name) or None
