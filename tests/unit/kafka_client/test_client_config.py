"""Kafka client security properties: parsing, validation and kafka-python arguments."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from kpo_devenv.pki import KafkaPki, generate_kafka_pki
from kpo_kafka.client_config import (
    ClientConfigError,
    ClientSecurity,
    SaslMechanism,
    Secret,
    SecurityProtocol,
    client_security_from_env,
    parse_jaas_config,
)

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PASSWORD = "s3cr3t-pa55word"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> KafkaPki:
    return generate_kafka_pki(tmp_path_factory.mktemp("pki"))


def _refused(props: dict[str, str], *words: str, **kwargs: object) -> str:
    with pytest.raises(ClientConfigError) as info:
        ClientSecurity.from_properties(props, **kwargs)  # type: ignore[arg-type]
    text = str(info.value)
    for word in words:
        assert word in text, text
    assert PASSWORD not in text
    return text


def test_default_is_plaintext() -> None:
    security = ClientSecurity.from_properties({})
    assert security.protocol is SecurityProtocol.PLAINTEXT
    assert security.kafka_python_kwargs() == {"security_protocol": "PLAINTEXT"}
    assert security.ssl_context() is None


def test_bad_protocol_is_named() -> None:
    _refused({"security.protocol": "TLS"}, "security.protocol", "'TLS'", "SASL_SSL")


def test_unknown_property_is_named() -> None:
    _refused({"ssl.protocl": "TLSv1.3"}, "ssl.protocl")
    _refused({"ssl.cipher.suites": "x"}, "ssl.cipher.suites")


def test_jaas_plain_and_scram_options() -> None:
    text = f'{PLAIN} required username="alice" password="p\\"w;d";'
    assert parse_jaas_config(text) == {"username": "alice", "password": 'p"w;d'}
    text = f'{SCRAM} REQUIRED\n  username=bob\n  password="{PASSWORD}"\n  tokenauth=false ;'
    assert parse_jaas_config(text) == {"username": "bob", "password": PASSWORD}


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("com.example.Krb5LoginModule required;", "not supported"),
        (f'{PLAIN} mandatory username="a" password="b";', "control flag"),
        (f'{PLAIN} required username="a" password="b"', "one entry"),
        (f'{PLAIN} required username="a";', "no password"),
        (f'{PLAIN} required username="a" password="b" serviceName="x";', "serviceName"),
        (f'{PLAIN} required username="a" password="b" tokenauth=false;', "tokenauth"),
        (f'{SCRAM} required username="a" password="b" tokenauth=true;', "delegation"),
        (f'{PLAIN} required username="a" username="b" password="c";', "twice"),
        (f'{PLAIN} required username="a" password="b"; {PLAIN} required;', "malformed"),
    ],
)
def test_jaas_refused(text: str, word: str) -> None:
    with pytest.raises(ClientConfigError, match=word):
        parse_jaas_config(text)


def test_bad_jaas_never_echoes_the_password() -> None:
    jaas = f'{PLAIN} required username="a" password="{PASSWORD}" extra'
    props = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}
    _refused({**props, "sasl.jaas.config": jaas}, "sasl.jaas.config")


def test_sasl_plaintext_scram() -> None:
    security = ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": f'{SCRAM} required username="op" password="{PASSWORD}";',
        }
    )
    assert security.sasl_mechanism is SaslMechanism.SCRAM_SHA_512
    assert security.kafka_python_kwargs() == {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "op",
        "sasl_plain_password": PASSWORD,
    }
    assert PASSWORD not in repr(security) and PASSWORD not in security.describe()
    assert "SCRAM-SHA-512 as op" in security.describe()


def test_bad_mechanism_and_gssapi_default() -> None:
    props = {"security.protocol": "SASL_SSL"}
    _refused({**props, "sasl.mechanism": "OAUTHBEARER"}, "sasl.mechanism", "OAUTHBEARER")
    _refused(props, "sasl.mechanism", "GSSAPI (Kafka's default)")


def test_sasl_needs_credentials_and_not_both() -> None:
    props = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}
    _refused(props, "username")
    _refused(props, "password", username="u")
    jaas = f'{PLAIN} required username="a" password="b";'
    _refused({**props, "sasl.jaas.config": jaas}, "both", username="u", password=Secret("x"))
    security = ClientSecurity.from_properties(props, username="u", password=Secret(PASSWORD))
    assert security.kafka_python_kwargs()["sasl_plain_password"] == PASSWORD


def test_settings_of_an_unused_layer_are_refused() -> None:
    _refused({"sasl.mechanism": "PLAIN"}, "sasl.mechanism", "PLAINTEXT")
    _refused({"security.protocol": "SASL_PLAINTEXT", "ssl.truststore.type": "PEM"}, "ssl.")
    _refused({"security.protocol": "SSL"}, "SASL", username="u")


def test_missing_truststore_file(tmp_path: Path) -> None:
    props = {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tmp_path / "nope.pem"),
    }
    _refused(props, "ssl.truststore.location", "nope.pem")


def test_truststore_must_be_pem(pki: KafkaPki) -> None:
    props = {"security.protocol": "SSL", "ssl.truststore.location": str(pki.ca.cert)}
    _refused(props, "ssl.truststore.type", "JKS")
    _refused({**props, "ssl.truststore.type": "PKCS12"}, "PKCS12")
    _refused({**props, "ssl.truststore.type": "PEM", "ssl.truststore.password": "x"}, "password")
    inline = pki.ca.cert.read_text()
    _refused({**props, "ssl.truststore.type": "PEM", "ssl.truststore.certificates": inline}, "both")
    _refused(
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": "x",
        },
        "no PEM certificate",
    )


def test_ssl_with_inline_and_file_truststore(pki: KafkaPki) -> None:
    base = {"security.protocol": "SSL", "ssl.truststore.type": "PEM"}
    by_file = ClientSecurity.from_properties({**base, "ssl.truststore.location": str(pki.ca.cert)})
    inline = pki.ca.cert.read_text()
    by_value = ClientSecurity.from_properties({**base, "ssl.truststore.certificates": inline})
    assert by_file.ca_certificates == by_value.ca_certificates == inline.strip()
    context = by_file.ssl_context()
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    kwargs = by_file.kafka_python_kwargs()
    assert kwargs["security_protocol"] == "SSL" and kwargs["ssl_context"] is context
    assert kwargs["ssl_check_hostname"] is True


def test_endpoint_identification(pki: KafkaPki) -> None:
    base = {"security.protocol": "SSL", "ssl.truststore.type": "PEM"}
    base["ssl.truststore.location"] = str(pki.ca.cert)
    off = ClientSecurity.from_properties({**base, "ssl.endpoint.identification.algorithm": ""})
    assert off.check_hostname is False
    context = off.ssl_context()
    assert context is not None and not context.check_hostname
    _refused({**base, "ssl.endpoint.identification.algorithm": "ldap"}, "'ldap'")


def test_mutual_tls_keystore(pki: KafkaPki, tmp_path: Path) -> None:
    client = pki.client("operator")
    chain, key = client.cert.read_text(), client.key.read_text()
    base = {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca.cert),
        "ssl.keystore.type": "PEM",
    }
    inline = ClientSecurity.from_properties(
        {**base, "ssl.keystore.certificate.chain": chain, "ssl.keystore.key": key}
    )
    assert inline.certificate_chain == chain.strip() and inline.private_key == Secret(key.strip())
    assert key not in repr(inline)
    assert inline.ssl_context() is not None
    bundle = tmp_path / "client.pem"
    bundle.write_text(key + chain)
    located = ClientSecurity.from_properties({**base, "ssl.keystore.location": str(bundle)})
    assert located.ssl_context() is not None and "client certificate" in located.describe()
    _refused({**base, "ssl.keystore.certificate.chain": chain}, "ssl.keystore.key is missing")
    _refused(
        {**base, "ssl.keystore.location": str(bundle), "ssl.keystore.password": "x"},
        "ssl.keystore.password",
    )
    wrong = pki.client("other").key.read_text()
    _refused(
        {**base, "ssl.keystore.certificate.chain": chain, "ssl.keystore.key": wrong},
        "cannot be loaded",
    )
    _refused({**base, "ssl.keystore.type": "JKS", "ssl.keystore.location": str(bundle)}, "JKS")


def test_from_env_file_overrides_and_secret_files(pki: KafkaPki, tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        "ssl.truststore.type=PEM\n"
        "ssl.truststore.location=ca.crt\n"
    )
    (tmp_path / "ca.crt").write_text(pki.ca.cert.read_text())
    secret = tmp_path / "password"
    secret.write_text(PASSWORD + "\n")
    env = {
        "KPO_KAFKA_CLIENT_CONFIG": str(config),
        "KPO_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "KPO_KAFKA_SASL_USERNAME": "operator",
        "KPO_KAFKA_SASL_PASSWORD_FILE": str(secret),
        "KPO_KAFKA_PORT": "tcp://10.0.0.7:9092",  # a Kubernetes service link: ignored
    }
    security = client_security_from_env(env)
    assert security.protocol is SecurityProtocol.SASL_SSL
    assert security.sasl_mechanism is SaslMechanism.SCRAM_SHA_512
    assert security.password == Secret(PASSWORD)
    assert security.ca_certificates == pki.ca.cert.read_text().strip()
    client = pki.client("env-client")
    env.update(
        {
            "KPO_KAFKA_SSL_KEYSTORE_TYPE": "PEM",
            "KPO_KAFKA_SSL_KEYSTORE_CERTIFICATE_CHAIN_FILE": str(client.cert),
            "KPO_KAFKA_SSL_KEYSTORE_KEY_FILE": str(client.key),
        }
    )
    assert client_security_from_env(env).certificate_chain == client.cert.read_text().strip()
    env["KPO_KAFKA_SASL_PASSWORD_FILE"] = str(tmp_path / "missing")
    with pytest.raises(ClientConfigError, match="KPO_KAFKA_SASL_PASSWORD_FILE"):
        client_security_from_env(env)


def test_unparsable_properties_file(tmp_path: Path) -> None:
    with pytest.raises(ClientConfigError, match="cannot read"):
        client_security_from_env({"KPO_KAFKA_CLIENT_CONFIG": str(tmp_path / "none")})
