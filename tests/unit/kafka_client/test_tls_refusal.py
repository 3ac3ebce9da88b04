"""Finding why TLS to a broker failed (kafka-python only reports a bootstrap timeout)."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kpo_devenv.pki import KafkaPki, generate_kafka_pki
from kpo_kafka.admin import KafkaPythonAdmin, tls_refusal
from kpo_kafka.admin_types import KafkaAuthenticationError
from kpo_kafka.client_config import ClientSecurity


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> KafkaPki:
    return generate_kafka_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def mtls_server(pki: KafkaPki) -> Iterator[str]:
    """A TLS server that requires a client certificate, as ssl.client.auth=required does."""
    broker = pki.broker(0)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(broker.cert, broker.key)
    context.load_verify_locations(pki.ca.cert)
    context.verify_mode = ssl.CERT_REQUIRED
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def handle(conn: socket.socket) -> None:
        try:
            with context.wrap_socket(conn, server_side=True) as tls:
                tls.recv(64)
        except (ssl.SSLError, OSError):
            pass

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        listener.close()


def _security(pki: KafkaPki, **extra: str) -> ClientSecurity:
    props = {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca.cert),
        **extra,
    }
    return ClientSecurity.from_properties(props)


def test_missing_client_certificate_is_reported(pki: KafkaPki, mtls_server: str) -> None:
    context = _security(pki).ssl_context()
    assert context is not None
    problem = tls_refusal(mtls_server, context)
    assert problem is not None and problem.startswith(mtls_server)
    assert "CERTIFICATE_REQUIRED" in problem or "certificate" in problem.lower()

    admin = KafkaPythonAdmin(mtls_server, "kpo-test", 2000, _security(pki))
    with pytest.raises(KafkaAuthenticationError, match="TLS handshake failed"):
        admin.describe_cluster()


def test_a_client_certificate_passes_and_an_untrusted_broker_does_not(
    pki: KafkaPki, mtls_server: str, tmp_path: Path
) -> None:
    client = pki.client("kpo-operator")
    good = _security(
        pki,
        **{
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": client.cert.read_text(),
            "ssl.keystore.key": client.key.read_text(),
        },
    ).ssl_context()
    assert good is not None
    assert tls_refusal(mtls_server, good) is None
    other = generate_kafka_pki(tmp_path / "other")
    untrusted = _security(other).ssl_context()
    assert untrusted is not None
    problem = tls_refusal(mtls_server, untrusted)
    assert problem is not None and "CERTIFICATE_VERIFY_FAILED" in problem
    assert tls_refusal("127.0.0.1:1", good) is None  # unreachable: not a TLS problem
