"""``--only tls``: produce and consume over SASL_SSL next to PLAINTEXT, on both systems.

Each system runs one 3-broker cluster with two client listeners, configured alike:

- ``PLAINTEXT``, also the inter-broker listener (so replication costs the same in both
  figures), where the topics are created;
- ``SASL_SSL`` with SCRAM-SHA-512 (``listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config``),
  PEM keystores (``ssl.keystore.type=PEM``) issued per broker by a CA made for the run
  (:func:`kpo_devenv.pki.generate_kafka_pki`), TLS 1.2/1.3 as negotiated by default.

No authorizer on either (authorization is not what this measures). The SCRAM user
:data:`BENCH_USER` is created in ZooKeeper before the brokers start: for kpo with
:func:`kpo_devenv.kafka_security.add_scram_user`, for Apache Kafka with its own
``kafka-configs --zookeeper``. The same Java load generators then produce and consume once
over each listener (:mod:`kpo_bench.throughput`), the SASL_SSL ones with a client
properties file (``--producer.config``). The report adds each system's TLS overhead,
``1 - SASL_SSL / PLAINTEXT`` of its own figures in the same run.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from pathlib import Path

from kpo_bench.throughput import Transport
from kpo_devenv.apache_kafka import (
    SCRAM_MECHANISM,
    ApacheKafkaCluster,
    KafkaSecurity,
    client_properties,
    write_properties,
)
from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_devenv.kafka_security import add_scram_user, broker_ssl_properties
from kpo_devenv.pki import KafkaPki, generate_kafka_pki

#: The benchmark's SCRAM user.
BENCH_USER = "kpo-bench"
#: The secured listener (its name is its security protocol on both systems).
SASL_LISTENER = "SASL_SSL"
LISTENERS = ("PLAINTEXT", SASL_LISTENER)
_SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


class TlsSetup:
    """The run's CA, the benchmark user's password and its client properties file.

    Args:
        workdir: the run's folder (``pki/`` and ``sasl-ssl-client.properties`` go there).
    """

    def __init__(self, workdir: Path) -> None:
        self.pki: KafkaPki = generate_kafka_pki(workdir / "pki")
        self.password = secrets.token_urlsafe(18)
        self.security = KafkaSecurity(
            self.pki,
            LISTENERS,
            scram_users={BENCH_USER: self.password},
            authorization=False,
        )
        #: Java client properties of :data:`BENCH_USER` over ``SASL_SSL`` (with its password).
        self.client_config = write_properties(
            workdir / "sasl-ssl-client.properties",
            client_properties(self.security, SASL_LISTENER, user=BENCH_USER),
        )

    @property
    def transport(self) -> Transport:
        """How the load generators reach the ``SASL_SSL`` listener."""
        return Transport(SASL_LISTENER, self.client_config, "-sasl-ssl")

    def kpo_cluster(
        self, workdir: Path, zookeeper_connect: str, properties: Mapping[str, str]
    ) -> KafkaCluster:
        """Return kpo's 3 brokers with both listeners; creates the SCRAM user in ZooKeeper.

        Raises:
            kpo_broker.zk.errors.ZkError: ZooKeeper failed.
        """
        add_scram_user(zookeeper_connect, BENCH_USER, self.password, (SCRAM_MECHANISM,))
        secured = {
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": SCRAM_MECHANISM,
            f"listener.name.sasl_ssl.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": _SCRAM_LOGIN,
        }
        return KafkaCluster(
            workdir,
            zookeeper_connect,
            3,
            {**properties, **secured},
            listeners={name: name for name in LISTENERS},
            broker_properties=lambda broker_id: broker_ssl_properties(self.pki, broker_id),
        )

    def apache_cluster(
        self,
        workdir: Path,
        zookeeper_connect: str,
        classpath: str,
        properties: Mapping[str, str],
    ) -> ApacheKafkaCluster:
        """Return Apache Kafka's 3 brokers with both listeners (the user is made at start)."""
        return ApacheKafkaCluster(
            workdir, zookeeper_connect, classpath, 3, properties, security=self.security
        )
