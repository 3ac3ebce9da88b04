"""The control plane's PKI.

A CA, the apiserver's serving cert, client certs and a service-account key pair.

Everything is generated with ``cryptography`` into one folder as PEM files;
keys are ECDSA P-256, certificates valid for ``VALIDITY``.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class CertKeyPair:
    """Paths of a PEM certificate and its PEM private key."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    """The files the control plane and its clients need.

    Attributes:
        directory: folder holding every file.
        ca: the cluster CA (signs every other cert; ``--client-ca-file``).
        serving: kube-apiserver's serving cert (loopback IPs and Kubernetes' DNS names).
        admin: a client cert for user ``kpo-admin`` in group ``system:masters``.
        service_account_key: private key signing service-account tokens.
        service_account_pub: its public key (``--service-account-key-file``).
    """

    directory: Path
    ca: CertKeyPair
    serving: CertKeyPair
    admin: CertKeyPair
    service_account_key: Path
    service_account_pub: Path

    def client(
        self, name: str, common_name: str, organizations: tuple[str, ...] = ()
    ) -> CertKeyPair:
        """Issue a client certificate signed by the CA (e.g. for kube-controller-manager).

        Args:
            name: file name stem in :attr:`directory`.
            common_name: the Kubernetes user name.
            organizations: the Kubernetes groups.
        """
        return _issue(self.directory, name, self.ca, common_name, organizations, client=True)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def _load(pair: CertKeyPair) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert = x509.load_pem_x509_certificate(pair.cert.read_bytes())
    key = serialization.load_pem_private_key(pair.key.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return cert, key


def _make_ca(directory: Path) -> CertKeyPair:
    key = _new_key()
    now = dt.datetime.now(dt.UTC)
    name = _name("kpo-test-ca")
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    pair = CertKeyPair(directory / "ca.crt", directory / "ca.key")
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pair.key, key)
    return pair


def _issue(
    directory: Path,
    name: str,
    ca: CertKeyPair,
    common_name: str,
    organizations: tuple[str, ...] = (),
    *,
    client: bool = False,
    server: bool | None = None,
    dns_names: tuple[str, ...] = (),
    ip_addresses: tuple[str, ...] = (),
) -> CertKeyPair:
    ca_cert, ca_key = _load(ca)
    key = _new_key()
    now = dt.datetime.now(dt.UTC)
    usages: list[x509.ObjectIdentifier] = []
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    if server if server is not None else not client:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name, organizations))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if dns_names or ip_addresses:
        names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
        names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    pair = CertKeyPair(directory / f"{name}.crt", directory / f"{name}.key")
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pair.key, key)
    return pair


#: DNS names the in-cluster ``kubernetes`` Service answers to.
APISERVER_DNS_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


def generate_pki(directory: Path, service_ip: str = "10.0.0.1") -> Pki:
    """Generate the control plane's PKI into ``directory`` (created if missing).

    Args:
        directory: output folder for the PEM files.
        service_ip: first IP of the service CIDR (the ``kubernetes`` Service's
            ClusterIP), added to the serving cert's SANs.
    """
    directory.mkdir(parents=True, exist_ok=True)
    ca = _make_ca(directory)
    serving = _issue(
        directory,
        "apiserver",
        ca,
        "kube-apiserver",
        dns_names=APISERVER_DNS_NAMES,
        ip_addresses=("127.0.0.1", service_ip),
    )
    admin = _issue(directory, "admin", ca, "kpo-admin", ("system:masters",), client=True)
    sa_key = _new_key()
    sa_key_path = directory / "sa.key"
    sa_pub_path = directory / "sa.pub"
    _write_key(sa_key_path, sa_key)
    sa_pub_path.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return Pki(directory, ca, serving, admin, sa_key_path, sa_pub_path)


@dataclass(frozen=True)
class KafkaPki:
    """PEM files for TLS between Kafka clients and brokers (listeners ``SSL`` / ``SASL_SSL``).

    Attributes:
        directory: folder holding every file.
        ca: the CA every broker and client trusts (``ssl.truststore.location`` with
            ``ssl.truststore.type=PEM``).
    """

    directory: Path
    ca: CertKeyPair

    def broker(self, broker_id: int, host: str = "localhost") -> CertKeyPair:
        """Issue broker ``broker_id``'s certificate, usable on both sides of mutual TLS.

        Its subject is ``CN=broker-<id>,O=kpo`` (the inter-broker principal under Kafka's
        default ``ssl.principal.mapping.rules``); SANs are ``host``, ``localhost`` and
        ``127.0.0.1`` so clients verifying the host name accept it.
        """
        return _issue(
            self.directory,
            f"broker-{broker_id}",
            self.ca,
            f"broker-{broker_id}",
            ("kpo",),
            client=True,
            server=True,
            dns_names=tuple(dict.fromkeys((host, "localhost"))),
            ip_addresses=("127.0.0.1",),
        )

    def zookeeper(self, host: str = "localhost") -> CertKeyPair:
        """Issue the ZooKeeper server's certificate (its TLS client port, KIP-515).

        Its subject is ``CN=zookeeper,O=kpo``; SANs ``host``, ``localhost`` and ``127.0.0.1``
        (brokers check the host name by default). Usable as a client certificate too, e.g.
        for the four-letter commands of a server that requires one.
        """
        return _issue(
            self.directory,
            "zookeeper",
            self.ca,
            "zookeeper",
            ("kpo",),
            client=True,
            server=True,
            dns_names=tuple(dict.fromkeys((host, "localhost"))),
            ip_addresses=("127.0.0.1",),
        )

    def client(self, name: str, common_name: str | None = None) -> CertKeyPair:
        """Issue a client certificate for mutual TLS; its subject is ``CN=<common_name>``.

        Args:
            name: file name stem in :attr:`directory`.
            common_name: the certificate's CN (defaults to ``name``); a broker maps it to the
                principal ``User:CN=<common_name>`` under Kafka's default mapping rules.
        """
        return _issue(self.directory, name, self.ca, common_name or name, client=True)


def generate_kafka_pki(directory: Path) -> KafkaPki:
    """Create a CA for a Kafka cluster's TLS listeners in ``directory`` (created if missing).

    Issue broker and client certificates from the returned :class:`KafkaPki`.
    """
    directory.mkdir(parents=True, exist_ok=True)
    return KafkaPki(directory, _make_ca(directory))
