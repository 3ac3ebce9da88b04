"""OperatorSettings.from_env: the KPO_* variables the chart sets, defaults and errors."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from kpo_operator.settings import OperatorSettings, SettingsError

BOOTSTRAP = {"KPO_BOOTSTRAP_SERVERS": "kafka-0.kafka:9092"}


def test_defaults_with_only_the_bootstrap_servers() -> None:
    settings = OperatorSettings.from_env(BOOTSTRAP)
    assert settings.bootstrap_servers == ("kafka-0.kafka:9092",)
    assert settings.namespaces == ()
    assert settings.clusterwide is True
    assert settings.poll_interval_s == 2.0
    assert settings.quota_interval_s == 30.0
    assert settings.rate_window_s == 30.0
    assert settings.partition_status_interval_s == 30.0
    assert settings.request_timeout_ms == 30000
    assert settings.client_id == "kpo-operator"
    assert settings.namespace == "default"
    assert settings.throttle_ledger == "kpo-throttle-ledger"


def test_every_variable_is_parsed() -> None:
    settings = OperatorSettings.from_env(
        {
            "KPO_BOOTSTRAP_SERVERS": " a:9092, b.example:19092 ,,",
            "KPO_NAMESPACES": "kafka, team-a ,",
            "KPO_POLL_INTERVAL_S": "0.5",
            "KPO_QUOTA_INTERVAL_S": "60",
            "KPO_CLUSTER_INTERVAL_S": "15",
            "KPO_RATE_WINDOW_S": "12.5",
            "KPO_PARTITION_STATUS_INTERVAL_S": "0",
            "KPO_REQUEST_TIMEOUT_MS": "45000",
            "KPO_CLIENT_ID": "kpo-test",
            "KPO_NAMESPACE": "kpo-system",
            "KPO_THROTTLE_LEDGER": "kpo-operator-throttle-ledger",
            "KPO_SOMETHING_ELSE": "ignored",
            "PATH": "/usr/bin",
        }
    )
    assert settings.bootstrap_servers == ("a:9092", "b.example:19092")
    assert settings.namespaces == ("kafka", "team-a")
    assert settings.clusterwide is False
    assert settings.poll_interval_s == 0.5
    assert settings.quota_interval_s == 60.0
    assert settings.cluster_interval_s == 15.0
    assert settings.rate_window_s == 12.5
    assert settings.partition_status_interval_s == 0.0
    assert settings.request_timeout_ms == 45000
    assert settings.client_id == "kpo-test"
    assert settings.namespace == "kpo-system"
    assert settings.throttle_ledger == "kpo-operator-throttle-ledger"


def test_namespace_defaults_to_the_first_watched_one() -> None:
    settings = OperatorSettings.from_env({**BOOTSTRAP, "KPO_NAMESPACES": "team-b,team-a"})
    assert settings.namespace == "team-b"


@pytest.mark.parametrize(
    ("variable", "value"), [("KPO_NAMESPACE", "Not_A_Name"), ("KPO_THROTTLE_LEDGER", "-x")]
)
def test_ledger_location_must_be_kubernetes_names(variable: str, value: str) -> None:
    with pytest.raises(SettingsError) as caught:
        OperatorSettings.from_env({**BOOTSTRAP, variable: value})
    assert variable in str(caught.value)


def test_empty_namespaces_mean_the_whole_cluster() -> None:
    settings = OperatorSettings.from_env({**BOOTSTRAP, "KPO_NAMESPACES": " , "})
    assert settings.namespaces == () and settings.clusterwide


def test_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KPO_BOOTSTRAP_SERVERS", "[::1]:9092")
    monkeypatch.setenv("KPO_POLL_INTERVAL_S", "7")
    monkeypatch.delenv("KPO_NAMESPACES", raising=False)
    settings = OperatorSettings.from_env()
    assert settings.bootstrap_servers == ("[::1]:9092",)
    assert settings.poll_interval_s == 7.0


@pytest.mark.parametrize(
    ("environ", "variable"),
    [
        ({}, "KPO_BOOTSTRAP_SERVERS"),
        ({"KPO_BOOTSTRAP_SERVERS": " , "}, "KPO_BOOTSTRAP_SERVERS"),
        ({"KPO_BOOTSTRAP_SERVERS": "kafka"}, "KPO_BOOTSTRAP_SERVERS"),
        ({"KPO_BOOTSTRAP_SERVERS": "kafka:http"}, "KPO_BOOTSTRAP_SERVERS"),
        ({"KPO_BOOTSTRAP_SERVERS": "kafka:0"}, "KPO_BOOTSTRAP_SERVERS"),
        ({"KPO_BOOTSTRAP_SERVERS": "a:9092,kafka:65536"}, "KPO_BOOTSTRAP_SERVERS"),
        ({"KPO_BOOTSTRAP_SERVERS": ":9092"}, "KPO_BOOTSTRAP_SERVERS"),
        ({**BOOTSTRAP, "KPO_POLL_INTERVAL_S": "soon"}, "KPO_POLL_INTERVAL_S"),
        ({**BOOTSTRAP, "KPO_POLL_INTERVAL_S": "0"}, "KPO_POLL_INTERVAL_S"),
        ({**BOOTSTRAP, "KPO_POLL_INTERVAL_S": "3601"}, "KPO_POLL_INTERVAL_S"),
        ({**BOOTSTRAP, "KPO_POLL_INTERVAL_S": "nan"}, "KPO_POLL_INTERVAL_S"),
        ({**BOOTSTRAP, "KPO_QUOTA_INTERVAL_S": "-1"}, "KPO_QUOTA_INTERVAL_S"),
        ({**BOOTSTRAP, "KPO_CLUSTER_INTERVAL_S": "0"}, "KPO_CLUSTER_INTERVAL_S"),
        ({**BOOTSTRAP, "KPO_RATE_WINDOW_S": ""}, "KPO_RATE_WINDOW_S"),
        (
            {**BOOTSTRAP, "KPO_PARTITION_STATUS_INTERVAL_S": "-1"},
            "KPO_PARTITION_STATUS_INTERVAL_S",
        ),
        ({**BOOTSTRAP, "KPO_REQUEST_TIMEOUT_MS": "999"}, "KPO_REQUEST_TIMEOUT_MS"),
        ({**BOOTSTRAP, "KPO_REQUEST_TIMEOUT_MS": "1.5"}, "KPO_REQUEST_TIMEOUT_MS"),
        ({**BOOTSTRAP, "KPO_CLIENT_ID": ""}, "KPO_CLIENT_ID"),
    ],
)
def test_bad_values_name_the_variable(environ: dict[str, str], variable: str) -> None:
    with pytest.raises(SettingsError) as caught:
        OperatorSettings.from_env(environ)
    assert f"{variable}:" in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(SettingsError) as caught:
        OperatorSettings.from_env({"KPO_POLL_INTERVAL_S": "x", "KPO_CLIENT_ID": ""})
    message = str(caught.value)
    for variable in ("KPO_BOOTSTRAP_SERVERS", "KPO_POLL_INTERVAL_S", "KPO_CLIENT_ID"):
        assert f"{variable}:" in message


def test_settings_are_frozen() -> None:
    settings = OperatorSettings.from_env(BOOTSTRAP)
    with pytest.raises(ValidationError):
        settings.poll_interval_s = 1.0


def test_kafka_client_security_from_the_environment() -> None:
    assert OperatorSettings.from_env(BOOTSTRAP).kafka_security.protocol == "PLAINTEXT"
    env = {
        **BOOTSTRAP,
        "KPO_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "KPO_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
        "KPO_KAFKA_SASL_USERNAME": "kpo-operator",
        "KPO_KAFKA_SASL_PASSWORD": "not-in-any-message",
    }
    settings = OperatorSettings.from_env(env)
    assert settings.kafka_security.describe() == "SASL_PLAINTEXT, SCRAM-SHA-256 as kpo-operator"
    assert "not-in-any-message" not in repr(settings)


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("KPO_KAFKA_SECURITY_PROTOCOL", "TLS", "security.protocol"),
        ("KPO_KAFKA_SASL_MECHANISM", "GSSAPI", "sasl.mechanism"),
        ("KPO_KAFKA_SSL_TRUSTSTORE_LOCATION", "/nonexistent/ca.crt", "ssl.truststore"),
    ],
)
def test_bad_kafka_client_settings_stop_the_operator(variable: str, value: str, named: str) -> None:
    env = {
        **BOOTSTRAP,
        "KPO_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "KPO_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "KPO_KAFKA_SASL_USERNAME": "kpo-operator",
        "KPO_KAFKA_SASL_PASSWORD": "not-in-any-message",
        variable: value,
    }
    with pytest.raises(SettingsError, match="invalid Kafka client settings") as info:
        OperatorSettings.from_env(env)
    assert named in str(info.value)
    assert "not-in-any-message" not in str(info.value)
