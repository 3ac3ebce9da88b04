"""TLS keystores and SCRAM users for brokers with security listeners (tests and devenv).

Kafka's PEM keystore (``ssl.keystore.type=PEM``, ``ssl.keystore.location``) is one file
holding the private key and the certificate chain: :func:`pem_keystore` writes it from a
:class:`~kpo_devenv.pki.CertKeyPair`. :func:`broker_ssl_properties` gives a broker's
``ssl.*`` properties. :func:`add_scram_user` creates a SCRAM user in ZooKeeper before the
brokers start, as ``kafka-configs --zookeeper ... --alter --add-config
'SCRAM-SHA-512=[password=...]' --entity-type users`` does (the credential formatted by
the broker's own ``ScramCredentialUtils`` equivalent, with a ``/config/changes``
notification); :func:`add_acls` creates ACLs there as ``kafka-acls --authorizer-properties
zookeeper.connect=... --add`` does (through the brokers' own ``AclAuthorizer`` store, with
its ``/kafka-acl-changes`` notification). :func:`zookeeper_client_jaas` writes the JAAS file
with which brokers (and these helpers, through a :class:`~kpo_broker.zk.security.ZkClientSecurity`)
authenticate to a ZooKeeper with SASL, and returns the ``KAFKA_OPTS`` naming it;
:func:`zookeeper_tls_properties` gives the ``zookeeper.ssl.*`` properties of TLS to
ZooKeeper.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from kpo_broker.security.acl import AclBinding
from kpo_broker.security.acl_store import AclStore
from kpo_broker.security.authorizer import AclAuthorizer
from kpo_broker.security.credentials import sanitize
from kpo_broker.security.scram import MECHANISMS, credential_to_string, generate_credential
from kpo_broker.zk.client import KafkaZkClient
from kpo_broker.zk.security import (
    DIGEST_LOGIN_MODULE,
    JAVA_LOGIN_CONFIG_PARAM,
    ZkClientSecurity,
    jaas_section,
)
from kpo_broker.zk.tls import NETTY_CLIENT_CNXN_SOCKET
from kpo_devenv.pki import CertKeyPair, KafkaPki

__all__ = [
    "add_acls",
    "add_scram_user",
    "broker_ssl_properties",
    "pem_keystore",
    "zookeeper_client_jaas",
    "zookeeper_tls_properties",
]


def pem_keystore(pair: CertKeyPair) -> Path:
    """Write ``<cert stem>.keystore.pem`` (key, then certificate) next to the pair; return it."""
    path = pair.cert.with_suffix(".keystore.pem")
    path.write_bytes(pair.key.read_bytes() + pair.cert.read_bytes())
    path.chmod(0o600)
    return path


def broker_ssl_properties(pki: KafkaPki, broker_id: int) -> dict[str, str]:
    """Return a broker's TLS properties: its PEM keystore (issued now) and the CA as truststore."""
    keystore = pem_keystore(pki.broker(broker_id))
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca.cert),
    }


def zookeeper_tls_properties(keystore: Path, truststore: Path) -> dict[str, str]:
    """Return Kafka's broker properties for TLS to ZooKeeper (KIP-515) with PEM stores.

    Args:
        keystore: PEM keystore (key and certificate chain): the client certificate, the
            broker's ``x509`` identity in ZooKeeper.
        truststore: PEM file of the CA that signed the ZooKeeper server's certificate.
    """
    return {
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.clientCnxnSocket": NETTY_CLIENT_CNXN_SOCKET,
        "zookeeper.ssl.keystore.type": "PEM",
        "zookeeper.ssl.keystore.location": str(keystore),
        "zookeeper.ssl.truststore.type": "PEM",
        "zookeeper.ssl.truststore.location": str(truststore),
    }


def add_scram_user(
    zookeeper_connect: str,
    user: str,
    password: str,
    mechanisms: Iterable[str] = ("SCRAM-SHA-512",),
    iterations: int = 4096,
    zk_security: ZkClientSecurity | None = None,
) -> None:
    """Create or replace ``user``'s SCRAM credentials in ``/config/users/<user>``.

    Args:
        zookeeper_connect: the cluster's ``zookeeper.connect`` (with its chroot).
        user: the user name.
        password: the clear password.
        mechanisms: ``SCRAM-SHA-256`` and/or ``SCRAM-SHA-512``.
        iterations: PBKDF2 iterations (at least 4096).
        zk_security: how to authenticate to ZooKeeper and which znode ACLs to create
            (as the brokers do: with ``zookeeper.set.acl`` only the brokers' own SASL
            user may write, and read, ``/config/users``).
    """
    zk = KafkaZkClient(zookeeper_connect, security=zk_security)
    zk.connect()
    try:
        name = sanitize(user)
        config = dict(zk.get_entity_config("users", name).config)
        for mechanism in mechanisms:
            credential = generate_credential(MECHANISMS[mechanism], password, iterations)
            config[mechanism] = credential_to_string(credential)
        zk.set_entity_config("users", name, config)
    finally:
        zk.close()


def add_acls(
    zookeeper_connect: str,
    bindings: Sequence[AclBinding],
    zk_security: ZkClientSecurity | None = None,
) -> None:
    """Store ACLs in ZooKeeper for ``AclAuthorizer`` brokers, running or not yet started.

    As ``kafka-acls --authorizer-properties zookeeper.connect=<connect> --add`` (Kafka 3.9,
    ``AclAuthorizer.createAcls``): the ACL roots are created if missing, each resource
    pattern's znode under ``/kafka-acl`` (literal) or ``/kafka-acl-extended`` (prefixed)
    gets the entries, and a change notification tells running brokers. Brokers started
    later load them at start-up.

    Args:
        zookeeper_connect: the cluster's ``zookeeper.connect`` (with its chroot).
        bindings: the ACLs (resource pattern and entry each).
        zk_security: how to authenticate to ZooKeeper (see :func:`add_scram_user`).

    Raises:
        ValueError: a binding is invalid or ZooKeeper refused it (the message has Kafka's
            error text).
    """
    zk = KafkaZkClient(zookeeper_connect, security=zk_security)
    zk.connect()
    try:
        store = AclStore(zk, AclAuthorizer())
        store.start()
        errors = [e for e in store.create_acls(list(bindings)) if e is not None]
    finally:
        zk.close()
    if errors:
        raise ValueError(f"ACLs refused: {'; '.join(e.message for e in errors)}")


def zookeeper_client_jaas(path: Path, username: str, password: str) -> str:
    """Write a JAAS file whose ``Client`` section logs in to ZooKeeper with SASL DIGEST-MD5.

    Args:
        path: the file to write (mode 0600).
        username: the ZooKeeper SASL user (a ``user_<name>`` of the server's JAAS file).
        password: its password.

    Returns:
        the ``KAFKA_OPTS`` value naming the file, as a Kafka broker is given it.
    """
    path.write_text(
        jaas_section("Client", DIGEST_LOGIN_MODULE, {"username": username, "password": password})
    )
    path.chmod(0o600)
    return f"-D{JAVA_LOGIN_CONFIG_PARAM}={path}"
