"""ZooKeeper client security: KAFKA_OPTS, the JAAS file, Kafka's default znode ACLs."""

from __future__ import annotations

from pathlib import Path

import pytest
from kazoo.security import ACL, Id, Permissions

from kpo_broker.config import ConfigError
from kpo_broker.zk.security import (
    default_acls,
    jvm_system_properties,
    parse_jaas_file,
    resolve_zk_client_security,
    sensitive_path,
)
from kpo_kafka.security import JaasError

_CREATOR_ALL = ACL(Permissions.ALL, Id("auth", ""))
_WORLD_READ = ACL(Permissions.READ, Id("world", "anyone"))
_WORLD_ALL = ACL(Permissions.ALL, Id("world", "anyone"))

_JAAS = """
// the broker's logins
KafkaServer {
  org.apache.kafka.common.security.plain.PlainLoginModule required
  username="admin" password="admin-secret";
};
/* ZooKeeper */ Client {
  org.apache.zookeeper.server.auth.DigestLoginModule required
  username="kafka"
  password="p}a;s\\"s";
};
"""


def test_kafka_opts_system_properties_are_read_as_the_jvm_does() -> None:
    opts = (
        "-Xmx1g -Djava.security.auth.login.config='/etc/kafka/my jaas.conf' "
        "-Dzookeeper.sasl.client=true -Dflag -Dzookeeper.sasl.client=false"
    )
    assert jvm_system_properties(opts) == {
        "java.security.auth.login.config": "/etc/kafka/my jaas.conf",
        "zookeeper.sasl.client": "false",
        "flag": "",
    }


def test_jaas_file_sections_comments_and_quoted_braces() -> None:
    sections = parse_jaas_file(_JAAS)
    assert list(sections) == ["KafkaServer", "Client"]
    (client,) = sections["Client"]
    assert client.login_module == "org.apache.zookeeper.server.auth.DigestLoginModule"
    assert client.options == {"username": "kafka", "password": 'p}a;s"s'}


@pytest.mark.parametrize(
    "text",
    [
        "Client { org.x.M required a=b; }",  # no ';' after the section
        "Client { org.x.M required a=b;",  # not closed
        "Client { org.x.M required a=b; }; Client { org.x.M required; };",  # twice
        "{ org.x.M required; };",  # no name
        "Client { org.x.M maybe; };",  # bad flag
    ],
)
def test_malformed_jaas_files_are_refused(text: str) -> None:
    with pytest.raises(JaasError):
        parse_jaas_file(text)


def test_default_acls_follow_kafka_zkdata() -> None:
    assert default_acls(False, "/config/users/alice") == [_WORLD_ALL]
    assert default_acls(True, "/brokers/ids/1") == [_CREATOR_ALL, _WORLD_READ]
    assert default_acls(True, "/config") == [_CREATOR_ALL, _WORLD_READ]
    assert default_acls(True, "/config/users") == [_CREATOR_ALL]
    assert default_acls(True, "/config/users/alice") == [_CREATOR_ALL]
    assert default_acls(True, "/config/brokers/<default>") == [_CREATOR_ALL]
    assert default_acls(True, "/delegation_token/tokens/t") == [_CREATOR_ALL]
    assert default_acls(True, "/consumers") == [_WORLD_ALL]
    assert sensitive_path("/config/users") and not sensitive_path("/config/topics/t")


def _jaas(tmp_path: Path, text: str = _JAAS) -> dict[str, str]:
    path = tmp_path / "jaas.conf"
    path.write_text(text)
    return {"java.security.auth.login.config": str(path)}


def test_client_section_gives_sasl_credentials(tmp_path: Path) -> None:
    security = resolve_zk_client_security({"zookeeper.set.acl": "true"}, _jaas(tmp_path))
    assert (security.username, security.password, security.set_acl) == ("kafka", 'p}a;s"s', True)
    assert security.sasl_options == {
        "mechanism": "DIGEST-MD5",
        "username": "kafka",
        "password": 'p}a;s"s',
    }
    assert "p}a" not in repr(security)


def test_zookeeper_sasl_clientconfig_names_the_section(tmp_path: Path) -> None:
    props = _jaas(tmp_path) | {"zookeeper.sasl.clientconfig": "KafkaServer"}
    with pytest.raises(ConfigError, match="DigestLoginModule"):
        resolve_zk_client_security({}, props)
    props["zookeeper.sasl.clientconfig"] = "Other"
    assert resolve_zk_client_security({}, props).username is None


def test_no_jaas_file_means_an_unauthenticated_client() -> None:
    security = resolve_zk_client_security({}, {})
    assert security.sasl_options is None and not security.set_acl


@pytest.mark.parametrize(
    ("properties", "system", "named"),
    [
        ({"zookeeper.set.acl": "true"}, {}, "zookeeper.set.acl"),
        ({"zookeeper.set.acl": "yes"}, {}, "zookeeper.set.acl"),
        ({}, {"zookeeper.sasl.client": "false"}, "zookeeper.sasl.client"),
        ({}, {"java.security.auth.login.config": "/nonexistent/jaas.conf"}, None),
    ],
)
def test_what_kafka_refuses_refuses_start_up(
    tmp_path: Path, properties: dict[str, str], system: dict[str, str], named: str | None
) -> None:
    if "zookeeper.sasl.client" in system:
        system = system | _jaas(tmp_path)
    with pytest.raises(ConfigError) as info:
        resolve_zk_client_security(properties, system)
    assert info.value.property_name == (named or "java.security.auth.login.config")
    assert "p}a" not in str(info.value)


def test_a_section_without_password_or_with_kerberos_is_refused(tmp_path: Path) -> None:
    no_password = (
        "Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=k; };"
    )
    with pytest.raises(ConfigError, match="username and password"):
        resolve_zk_client_security({}, _jaas(tmp_path, no_password))
    kerberos = 'Client { com.sun.security.auth.module.Krb5LoginModule required principal="k"; };'
    with pytest.raises(ConfigError, match="DIGEST-MD5"):
        resolve_zk_client_security({}, _jaas(tmp_path, kerberos))


def test_kafka_opts_is_read_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _jaas(tmp_path)["java.security.auth.login.config"]
    monkeypatch.setenv("KAFKA_OPTS", f"-Djava.security.auth.login.config={path}")
    assert resolve_zk_client_security({}).username == "kafka"
