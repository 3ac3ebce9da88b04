"""Kafka errors into the operator's types: codes, alter_configs result texts, exceptions."""

from __future__ import annotations

import kafka.errors as kafka_errors
import pytest

from kpo_kafka.admin_errors import api_error, error_of_class, parse_alter_result, translated
from kpo_kafka.admin_types import KafkaRequestError, KafkaUnavailableError, KafkaUnsupportedError


def test_code_zero_is_no_error() -> None:
    assert api_error(0) is None
    assert error_of_class(kafka_errors.NoError) is None


def test_codes_carry_kafka_names_and_retriability() -> None:
    unknown = api_error(3)
    assert unknown is not None
    assert (unknown.name, unknown.retriable) == ("UNKNOWN_TOPIC_OR_PARTITION", True)
    invalid = api_error(39, "replicas [9] are not alive")
    assert invalid is not None
    assert invalid.name == "INVALID_REPLICA_ASSIGNMENT"
    assert invalid.message == "replicas [9] are not alive"
    assert not invalid.retriable


def test_alter_configs_result_texts() -> None:
    assert parse_alter_result("OK") is None
    error = parse_alter_result("[Error 42] InvalidRequestError: unknown config key")
    assert error is not None
    assert (error.code, error.message) == (42, "unknown config key")
    garbled = parse_alter_result("something else")
    assert garbled is not None and garbled.name == "UNKNOWN_SERVER_ERROR"


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (kafka_errors.NotControllerError(), KafkaUnavailableError),
        (kafka_errors.KafkaConnectionError("refused"), KafkaUnavailableError),
        (kafka_errors.InvalidReplicationAssignmentError(), KafkaRequestError),
        (
            kafka_errors.IncompatibleBrokerVersion("no ListPartitionReassignments"),
            KafkaUnsupportedError,
        ),
        (RuntimeError("Failed to find active controller id!"), KafkaUnavailableError),
        (ConnectionRefusedError("refused"), KafkaUnavailableError),
    ],
)
def test_exceptions_become_the_admin_error_family(raised: Exception, expected: type) -> None:
    with (
        pytest.raises(expected, match="ListPartitionReassignments"),
        translated("ListPartitionReassignments"),
    ):
        raise raised


def test_unrelated_runtime_errors_pass_through() -> None:
    with pytest.raises(RuntimeError, match="boom"), translated("Metadata"):
        raise RuntimeError("boom")


def test_missing_acl_names_operation_and_resource() -> None:
    from kpo_kafka.admin_types import KafkaAuthorizationError

    with pytest.raises(KafkaAuthorizationError) as info, translated("AlterPartitionReassignments"):
        raise kafka_errors.ClusterAuthorizationFailedError()
    assert str(info.value) == (
        "AlterPartitionReassignments needs Alter on Cluster:kafka-cluster "
        "(CLUSTER_AUTHORIZATION_FAILED, 31)"
    )
    assert info.value.api == "AlterPartitionReassignments"
    assert info.value.error is not None and info.value.error.code == 31


def test_refused_credentials_and_tls_are_authentication_errors() -> None:
    import ssl

    from kpo_kafka.admin_types import KafkaAuthenticationError

    with pytest.raises(KafkaAuthenticationError, match="SASL"), translated("connect"):
        raise kafka_errors.SaslAuthenticationFailedError("bad credentials")
    with pytest.raises(KafkaAuthenticationError, match="TLS handshake"), translated("connect"):
        raise ssl.SSLError(1, "[SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] certificate required")


def test_authorized_operations_decoding() -> None:
    from kpo_kafka.acls import decode_operations

    assert decode_operations(None) is None
    assert decode_operations(-(2**31)) is None
    assert decode_operations((1 << 7) | (1 << 8)) == {"Alter", "Describe"}
    assert decode_operations({7, 11}) == {"Alter", "AlterConfigs"}
    assert decode_operations(["DESCRIBE", "ALTER_CONFIGS", "CLUSTER_ACTION"]) == {
        "Describe",
        "AlterConfigs",
        "ClusterAction",
    }
    assert decode_operations([]) == frozenset()
