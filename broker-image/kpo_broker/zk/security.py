"""How the broker authenticates to ZooKeeper and which ACLs its znodes get, as Kafka does.

Kafka's ZooKeeper client authenticates with SASL when the JAAS login configuration
(the JVM system property ``java.security.auth.login.config``, which Kafka users pass in
``KAFKA_OPTS``) has a section named by ``zookeeper.sasl.clientconfig`` (default
``Client``) and ``zookeeper.sasl.client`` is not ``false`` (Kafka's
``JaasUtils.isZkSaslEnabled``). The broker reads the same system properties from the
``KAFKA_OPTS`` environment variable (``-Dname=value`` words), e.g.::

    KAFKA_OPTS=-Djava.security.auth.login.config=/etc/kafka/jaas.conf

    Client {
      org.apache.zookeeper.server.auth.DigestLoginModule required
      username="kafka" password="kafka-secret";
    };

Only ``DigestLoginModule`` (SASL DIGEST-MD5, through kazoo and ``pure-sasl``) is
supported; a Kerberos section refuses start-up. Other sections of the file (e.g.
``KafkaServer``) are not read: listener JAAS configurations are broker properties.

``zookeeper.set.acl=true`` gives every znode the broker creates Kafka's ACLs
(``ZkData.defaultAcls``): all permissions for the creator (the authenticated broker,
ZooKeeper's ``auth`` scheme) plus read for anyone, except under the sensitive paths
(``ZkData.SensitiveRootPaths``: ``/config/users``, ``/config/brokers``,
``/delegation_token/tokens``), which only the creator may read; the old consumer path
``/consumers`` stays open. As in Kafka's ``KafkaZkClient.createZkClient``, the switch
without an authenticated ZooKeeper client refuses start-up, and so does a JAAS
``Client`` section while ``zookeeper.sasl.client=false``. A client certificate over TLS
(:mod:`kpo_broker.zk.tls`, ``zookeeper.ssl.client.enable`` with a keystore) authenticates
the broker too (ZooKeeper's ``x509`` scheme), with or without SASL.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kazoo.security import CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from kpo_broker.config import ConfigError
from kpo_broker.zk.tls import TlsConnectionHandler, ZkClientTls, resolve_zk_client_tls
from kpo_kafka.security import JaasEntry, JaasError, parse_jaas_config

__all__ = [
    "DIGEST_LOGIN_MODULE",
    "JAVA_LOGIN_CONFIG_PARAM",
    "SENSITIVE_ROOT_PATHS",
    "ZK_LOGIN_CONTEXT_NAME_KEY",
    "ZK_SASL_CLIENT",
    "ZkClientSecurity",
    "default_acls",
    "jaas_section",
    "jvm_system_properties",
    "parse_jaas_file",
    "resolve_zk_client_security",
    "sensitive_path",
]

#: JVM system property naming the JAAS login configuration file.
JAVA_LOGIN_CONFIG_PARAM = "java.security.auth.login.config"
#: ``false`` disables SASL in the ZooKeeper client (default ``true``).
ZK_SASL_CLIENT = "zookeeper.sasl.client"
#: The JAAS section the ZooKeeper client logs in with (default ``Client``).
ZK_LOGIN_CONTEXT_NAME_KEY = "zookeeper.sasl.clientconfig"
#: ZooKeeper's login module for SASL DIGEST-MD5 (user names and passwords).
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
#: Broker property turning znode ACLs on (Kafka's ``ZkConfigs.ZK_ENABLE_SECURE_ACLS_CONFIG``).
ZK_SET_ACL = "zookeeper.set.acl"

#: Paths only the creator may read (Kafka's ``ZkData.SensitiveRootPaths``; prefixes).
SENSITIVE_ROOT_PATHS = ("/config/users", "/config/brokers", "/delegation_token/tokens")
#: The old consumers' path, left open because consumers write under it (``ConsumerPathZNode``).
CONSUMERS_PATH = "/consumers"

_SYSTEM_PROPERTY = re.compile(r"-D([^=]+)=(.*)", re.DOTALL)


def sensitive_path(path: str) -> bool:
    """Whether ``path`` (chroot-relative) is under a sensitive root (``ZkData.sensitivePath``)."""
    return any(path.startswith(root) for root in SENSITIVE_ROOT_PATHS)


def default_acls(is_secure: bool, path: str) -> list[Any]:
    """Return the ACL list for a znode the broker creates at ``path`` (``ZkData.defaultAcls``).

    Args:
        is_secure: ``zookeeper.set.acl``.
        path: the znode, relative to the chroot.

    Returns:
        kazoo ``ACL`` values: world-all when not secure or for ``/consumers``; else
        creator-all, plus world-read unless :func:`sensitive_path`.
    """
    if not is_secure or path == CONSUMERS_PATH:
        return list(OPEN_ACL_UNSAFE)
    acls = list(CREATOR_ALL_ACL)
    if not sensitive_path(path):
        acls.extend(READ_ACL_UNSAFE)
    return acls


def jvm_system_properties(java_options: str) -> dict[str, str]:
    """Return the ``-Dname=value`` system properties of a JVM options string (``KAFKA_OPTS``).

    Words are split as a shell does; other options (``-Xmx1g``...) are ignored, and a
    later definition wins as in the JVM. ``-Dname`` without ``=`` defines an empty value.

    Raises:
        ValueError: unbalanced quotes.
    """
    properties: dict[str, str] = {}
    for word in shlex.split(java_options):
        match = _SYSTEM_PROPERTY.fullmatch(word)
        if match:
            properties[match.group(1)] = match.group(2)
        elif word.startswith("-D") and len(word) > 2:
            properties[word[2:]] = ""
    return properties


def _strip_comments(text: str) -> str:
    """Remove ``//`` and ``/* */`` comments outside quoted strings."""
    out: list[str] = []
    i, quoted = 0, False
    while i < len(text):
        char = text[i]
        if quoted:
            out.append(char)
            if char == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 1
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
            out.append(char)
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise JaasError("unterminated comment")
            i = end + 2
            continue
        else:
            out.append(char)
        i += 1
    return "".join(out)


def jaas_section(name: str, login_module: str, options: Mapping[str, str]) -> str:
    """Return one JAAS file section with a ``required`` entry; values quoted and escaped.

    The inverse of :func:`parse_jaas_file` for one section, e.g. ``jaas_section("Client",
    DIGEST_LOGIN_MODULE, {"username": "kafka", "password": "..."})``.
    """
    quoted = " ".join(
        '{}="{}"'.format(key, value.replace("\\", "\\\\").replace('"', '\\"'))
        for key, value in options.items()
    )
    return f"{name} {{\n  {login_module} required {quoted};\n}};\n"


def parse_jaas_file(text: str) -> dict[str, list[JaasEntry]]:
    """Parse a JAAS login configuration file (Java's ``ConfigFile`` syntax).

    The file holds sections ``Name { <LoginModule> <flag> [key="value" ...]; ... };``
    with ``//`` and ``/* */`` comments.

    Returns:
        section name -> its login module entries.

    Raises:
        JaasError: a malformed section or entry, or a section given twice (never quoting
            values, which hold passwords).
    """
    body = _strip_comments(text)
    sections: dict[str, list[JaasEntry]] = {}
    position = 0
    header = re.compile(r"\s*([A-Za-z0-9_.\-$]+)\s*\{")
    while body[position:].strip():
        match = header.match(body, position)
        if match is None:
            raise JaasError("expected '<section name> {'")
        name = match.group(1)
        close, quoted, i = -1, False, match.end()
        while i < len(body):
            if body[i] == "\\" and quoted:
                i += 2
                continue
            if body[i] == '"':
                quoted = not quoted
            elif body[i] == "}" and not quoted:
                close = i
                break
            i += 1
        if close < 0:
            raise JaasError(f"section {name} is not closed by '}}'")
        if name in sections:
            raise JaasError(f"section {name} is given twice")
        try:
            sections[name] = parse_jaas_config(body[match.end() : close])
        except JaasError as exc:
            raise JaasError(f"section {name}: {exc}") from None
        position = close + 1
        semicolon = re.compile(r"\s*;").match(body, position)
        if semicolon is None:
            raise JaasError(f"section {name} is not terminated by ';'")
        position = semicolon.end()
    return sections


@dataclass(frozen=True)
class ZkClientSecurity:
    """How a ZooKeeper client of the cluster authenticates and which ACLs it creates znodes with.

    Attributes:
        username: the SASL DIGEST-MD5 user, or None for an unauthenticated client.
        password: its password.
        set_acl: ``zookeeper.set.acl``: create znodes with :func:`default_acls`.
        tls: TLS to ZooKeeper (``zookeeper.ssl.*``), or None for plaintext.
    """

    username: str | None = None
    password: str | None = field(default=None, repr=False)
    set_acl: bool = False
    tls: ZkClientTls | None = None

    def summary(self) -> str:
        """Describe the settings without secrets, e.g. ``TLS (TLSv1.2), znode ACLs``."""
        parts = []
        if self.tls is None:
            parts.append("plaintext")
        else:
            parts.append(f"TLS ({', '.join(self.tls.settings.enabled_protocols)})")
            if self.tls.client_auth:
                parts.append("client certificate")
            if not self.tls.settings.endpoint_identification:
                parts.append("no host name check")
        if self.username is not None:
            parts.append(f"SASL DIGEST-MD5 as {self.username}")
        parts.append("znode ACLs" if self.set_acl else "open znodes")
        return ", ".join(parts)

    def kazoo_handler(self) -> TlsConnectionHandler | None:
        """Return a new kazoo handler for one client: TLS when :attr:`tls` is set, else None.

        Raises:
            ConfigError: the TLS stores cannot be loaded (see :meth:`ZkClientTls.context`).
        """
        return self.tls.handler() if self.tls is not None else None

    @property
    def sasl_options(self) -> dict[str, str] | None:
        """Kazoo's ``sasl_options`` for this client (None without SASL)."""
        if self.username is None:
            return None
        return {
            "mechanism": "DIGEST-MD5",
            "username": self.username,
            "password": self.password or "",
        }

    def acls(self, path: str) -> list[Any]:
        """Return the ACLs of a znode created at ``path`` (see :func:`default_acls`)."""
        return default_acls(self.set_acl, path)


def _parse_bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigError(name, f"Expected value to be either true or false (got {value!r})")
    return lowered == "true"


def resolve_zk_client_security(
    properties: Mapping[str, str], system_properties: Mapping[str, str] | None = None
) -> ZkClientSecurity:
    """Resolve the broker's ZooKeeper client security (Kafka's ``KafkaZkClient.createZkClient``).

    Args:
        properties: broker properties (``zookeeper.set.acl``, ``zookeeper.ssl.*``).
        system_properties: the JVM system properties; default those of ``KAFKA_OPTS``
            in the environment (:func:`jvm_system_properties`).

    Returns:
        the credentials of the JAAS section (if any), whether ACLs are set and the TLS
        settings (their stores loaded once here, so that a bad file stops start-up).

    Raises:
        ConfigError: an unreadable or malformed JAAS file, a section with a login module
            other than ``DigestLoginModule`` or without ``username``/``password``, a JAAS
            section while ``zookeeper.sasl.client=false``, ``zookeeper.set.acl=true``
            without SASL or a TLS client certificate, a malformed boolean, TLS settings
            that cannot be applied (:func:`~kpo_broker.zk.tls.resolve_zk_client_tls`).
    """
    if system_properties is None:
        try:
            system_properties = jvm_system_properties(os.environ.get("KAFKA_OPTS", ""))
        except ValueError as exc:
            raise ConfigError("KAFKA_OPTS", f"cannot be split into words: {exc}") from None
    set_acl = _parse_bool(ZK_SET_ACL, properties.get(ZK_SET_ACL, "false"))
    tls = resolve_zk_client_tls(properties, system_properties)
    if tls is not None:
        tls.context()
    sasl_enabled = _parse_bool(ZK_SASL_CLIENT, system_properties.get(ZK_SASL_CLIENT, "true"))
    context = system_properties.get(ZK_LOGIN_CONTEXT_NAME_KEY, "Client")
    login_config = system_properties.get(JAVA_LOGIN_CONFIG_PARAM)
    client = system_properties.get(ZK_SASL_CLIENT, "default:true")
    named = system_properties.get(ZK_LOGIN_CONTEXT_NAME_KEY, "default:Client")
    summary = (
        f"[{JAVA_LOGIN_CONFIG_PARAM}={login_config}, {ZK_SASL_CLIENT}={client}, "
        f"{ZK_LOGIN_CONTEXT_NAME_KEY}={named}]"
    )
    entries: list[JaasEntry] | None = None
    if login_config:
        try:
            text = Path(login_config).read_text()
        except OSError as exc:
            raise ConfigError(
                JAVA_LOGIN_CONFIG_PARAM,
                f"Exception while loading Zookeeper JAAS login context {summary}: "
                f"{exc.strerror or exc}",
            ) from None
        try:
            entries = parse_jaas_file(text).get(context)
        except JaasError as exc:
            raise ConfigError(
                JAVA_LOGIN_CONFIG_PARAM,
                f"Exception while loading Zookeeper JAAS login context {summary}: {exc}",
            ) from None
    if entries is not None and not sasl_enabled:
        raise ConfigError(
            ZK_SASL_CLIENT,
            "JAAS configuration is present, but system property zookeeper.sasl.client is set "
            f"to false, which disables SASL in the ZooKeeper client {summary}",
        )
    if entries is None:
        if set_acl and (tls is None or not tls.client_auth):
            raise ConfigError(
                ZK_SET_ACL,
                "zookeeper.set.acl is true, but ZooKeeper client TLS configuration identifying "
                "at least zookeeper.ssl.client.enable, zookeeper.clientCnxnSocket, and "
                "zookeeper.ssl.keystore.location was not present and the verification of the "
                f"JAAS login file failed {summary}",
            )
        return ZkClientSecurity(set_acl=set_acl, tls=tls)
    if len(entries) != 1 or entries[0].login_module != DIGEST_LOGIN_MODULE:
        raise ConfigError(
            JAVA_LOGIN_CONFIG_PARAM,
            f"JAAS section {context} must hold exactly one {DIGEST_LOGIN_MODULE} entry "
            "(only SASL DIGEST-MD5 to ZooKeeper is supported)",
        )
    options = entries[0].options
    if not options.get("username") or "password" not in options:
        raise ConfigError(
            JAVA_LOGIN_CONFIG_PARAM, f"JAAS section {context} needs username and password"
        )
    return ZkClientSecurity(options["username"], options["password"], set_acl, tls)
