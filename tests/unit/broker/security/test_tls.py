"""TLS contexts from PEM settings: inline stores, encrypted keys, protocols, cipher suites."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from kpo_broker.security.config import SslSettings
from kpo_broker.security.tls import TlsConfigError, client_context, server_context
from kpo_devenv.pki import KafkaPki, generate_kafka_pki


@pytest.fixture
def pki(tmp_path: Path) -> KafkaPki:
    return generate_kafka_pki(tmp_path / "pki")


def _encrypted_keystore(pki: KafkaPki, password: bytes) -> tuple[str, str]:
    pair = pki.broker(0)
    key = serialization.load_pem_private_key(pair.key.read_bytes(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password),
    )
    return pair.cert.read_text(), encrypted.decode()


def test_inline_keystore_with_key_password_and_inline_truststore(pki: KafkaPki) -> None:
    chain, key = _encrypted_keystore(pki, b"key-secret")
    settings = SslSettings(
        keystore_certificate_chain=chain,
        keystore_key=key,
        key_password="key-secret",
        truststore_certificates=pki.ca.cert.read_text(),
        client_auth="required",
    )
    context = server_context(settings)
    assert context.verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(TlsConfigError) as info:
        server_context(SslSettings(keystore_certificate_chain=chain, keystore_key=key))
    assert info.value.property_name == "ssl.keystore.key"
    assert "key-secret" not in str(info.value)


def test_enabled_protocols_bound_the_versions(pki: KafkaPki) -> None:
    pair = pki.broker(0)
    keystore = pair.cert.with_suffix(".pem")
    keystore.write_bytes(pair.key.read_bytes() + pair.cert.read_bytes())
    context = server_context(
        SslSettings(keystore_location=str(keystore), enabled_protocols=("TLSv1.2",))
    )
    assert context.minimum_version == context.maximum_version == ssl.TLSVersion.TLSv1_2


def test_cipher_suites_are_applied_or_refused(pki: KafkaPki) -> None:
    pair = pki.broker(0)
    keystore = pair.cert.with_suffix(".pem")
    keystore.write_bytes(pair.key.read_bytes() + pair.cert.read_bytes())
    base = {"keystore_location": str(keystore), "enabled_protocols": ("TLSv1.2",)}
    context = server_context(
        SslSettings(**base, cipher_suites=("ECDHE-ECDSA-AES256-GCM-SHA384",))  # type: ignore[arg-type]
    )
    tls12 = [c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 == ["ECDHE-ECDSA-AES256-GCM-SHA384"]
    with pytest.raises(TlsConfigError, match="no usable cipher"):
        server_context(SslSettings(**base, cipher_suites=("NOT-A-CIPHER",)))  # type: ignore[arg-type]
    with pytest.raises(TlsConfigError, match=r"TLS 1\.3 suites cannot be restricted"):
        server_context(
            SslSettings(keystore_location=str(keystore), cipher_suites=("TLS_AES_128_GCM_SHA256",))
        )


def test_mutual_tls_between_a_server_and_a_client_context(pki: KafkaPki, tmp_path: Path) -> None:
    def keystore(broker_id: int) -> str:
        pair = pki.broker(broker_id)
        path = tmp_path / f"ks-{broker_id}.pem"
        path.write_bytes(pair.key.read_bytes() + pair.cert.read_bytes())
        return str(path)

    trust = str(pki.ca.cert)
    server = server_context(
        SslSettings(
            keystore_location=keystore(0), truststore_location=trust, client_auth="required"
        )
    )
    client = client_context(SslSettings(keystore_location=keystore(1), truststore_location=trust))

    async def handshake() -> dict[str, object]:
        peers: dict[str, object] = {}

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            peers["client"] = writer.get_extra_info("peercert")
            writer.close()

        listener = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server)
        port = listener.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client, server_hostname="localhost"
        )
        peers["server"] = writer.get_extra_info("peercert")
        writer.close()
        await asyncio.sleep(0.1)
        listener.close()
        await listener.wait_closed()
        return peers

    peers = asyncio.run(handshake())
    assert (("commonName", "broker-1"),) in peers["client"]["subject"]  # type: ignore[index]
    assert (("commonName", "broker-0"),) in peers["server"]["subject"]  # type: ignore[index]
