"""The chart's secure default: listeners, certificates, ZooKeeper SASL, users, bootstrap."""

from __future__ import annotations

import base64
import json
import ssl
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import padding

from kpo_kafka.security_bootstrap import BootstrapError, SecurityPlan, acl_objects
from tests.unit.charts.helm import CHART, Manifest, find, helm, render


def _properties(objects: list[Manifest]) -> dict[str, str]:
    (config,) = find(objects, "ConfigMap", "-broker")
    lines = config["data"]["server.properties"].splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def _secret(objects: list[Manifest], suffix: str) -> dict[str, bytes]:
    (secret,) = find(objects, "Secret", suffix)
    return {k: base64.b64decode(v) for k, v in secret["data"].items()}


def _plan(objects: list[Manifest]) -> dict[str, Any]:
    (config,) = find(objects, "ConfigMap", "-security-bootstrap")
    plan: dict[str, Any] = json.loads(config["data"]["plan.json"])
    return plan


def test_default_brokers_serve_sasl_ssl_to_clients_and_mutual_tls_to_each_other() -> None:
    objects = render("default")
    props = _properties(objects)
    assert props["listeners"] == "CLIENT://0.0.0.0:9092,INTERNAL://0.0.0.0:9093"
    assert props["listener.security.protocol.map"] == "CLIENT:SASL_SSL,INTERNAL:SSL"
    assert props["inter.broker.listener.name"] == "INTERNAL"
    assert props["listener.name.client.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["listener.name.internal.ssl.client.auth"] == "required"
    assert props["zookeeper.set.acl"] == "true"
    assert props["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
    (sts,) = find(objects, "StatefulSet", "-broker")
    (broker,) = sts["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in broker["env"]}
    assert env["KAFKA_OPTS"] == (
        "-Djava.security.auth.login.config=/var/run/kpo/zookeeper_jaas.conf"
    )
    (zk_config,) = find(objects, "ConfigMap", "-zookeeper")
    zoo = zk_config["data"]["zoo.cfg"]
    assert "authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider" in zoo
    assert "enforce.auth.enabled=true\n" in zoo and "enforce.auth.schemes=sasl\n" in zoo
    assert len(_secret(objects, "-zookeeper-sasl")["password"]) == 32


def test_generated_ca_signs_one_certificate_per_broker_for_its_names(tmp_path: Path) -> None:
    objects = render("default", "security.tls.extraIpAddresses={127.0.0.1}")
    tls = _secret(objects, "-broker-tls")
    ca = x509.load_pem_x509_certificate(tls["ca.crt"])
    assert set(tls) == {"ca.crt"} | {f"broker-{i}.{e}" for i in range(3) for e in ("crt", "key")}
    for i in range(3):
        cert = x509.load_pem_x509_certificate(tls[f"broker-{i}.crt"])
        assert cert.subject.rfc4514_string() == "CN=kpo-broker"
        assert cert.issuer == ca.subject
        ca.public_key().verify(  # type: ignore[union-attr,call-arg]
            cert.signature,
            cert.tbs_certificate_bytes,
            padding.PKCS1v15(),  # type: ignore[arg-type]
            cert.signature_hash_algorithm,  # type: ignore[arg-type]
        )
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = names.get_values_for_type(x509.DNSName)
        assert f"kpo-broker-{i}.kpo-broker-headless.kafka.svc.cluster.local" in dns
        assert "kpo-broker.kafka.svc.cluster.local" in dns
        assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert {u._name for u in usages} >= {"serverAuth", "clientAuth"}
        keystore = tmp_path / f"broker-{i}.pem"
        keystore.write_bytes(tls[f"broker-{i}.key"] + tls[f"broker-{i}.crt"])
        ssl.create_default_context().load_cert_chain(keystore)  # key matches, Python loads it
    (ca_secret,) = find(objects, "Secret", "-ca")
    assert ca_secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_users_get_secrets_and_the_bootstrap_hook_job_creates_them() -> None:
    objects = render("default")
    for component, user in (
        ("operator", "kpo-operator"),
        ("placement", "kpo-placement"),
        ("test", "kpo-helm-test"),
    ):
        secret = _secret(objects, f"-user-{component}")
        assert secret["username"].decode() == user and len(secret["password"]) == 32
    (job,) = find(objects, "Job", "-security-bootstrap")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["python", "-m", "kpo_kafka.security_bootstrap"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["KPO_KAFKA_SECURITY_PROTOCOL"] == "SSL"
    assert env["KPO_BOOTSTRAP_SERVERS"].split(",")[0] == (
        "kpo-broker-0.kpo-broker-headless.kafka.svc.cluster.local:9093"
    )
    plan = _plan(objects)
    assert plan["authorization"] is True
    assert [u["name"] for u in plan["users"]] == ["kpo-operator", "kpo-placement", "kpo-helm-test"]


def test_authorization_switch_off_drops_the_authorizer_and_the_acls() -> None:
    objects = render("default", "security.authorization.enabled=false")
    assert "authorizer.class.name" not in _properties(objects)
    assert _plan(objects)["authorization"] is False


def test_default_authorizer_super_user_and_least_privilege_acls() -> None:
    objects = render("default")
    props = _properties(objects)
    assert props["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
    assert props["super.users"] == "User:CN=kpo-broker"
    plan = _plan(objects)
    assert plan["authorization"] is True
    acls = {
        u["name"]: {(a["resourceType"], a["resourceName"], a["operation"]) for a in u["acls"]}
        for u in plan["users"]
    }
    assert ("Cluster", "kafka-cluster", "Alter") in acls["kpo-operator"]
    assert ("Topic", "*", "AlterConfigs") in acls["kpo-operator"]
    assert not any(op in ("Alter", "AlterConfigs", "Write") for _, _, op in acls["kpo-placement"])
    assert {r for r, _, _ in acls["kpo-helm-test"]} == {"Topic"}
    assert {n for _, n, _ in acls["kpo-helm-test"]} == {"kpo-helm-test"}


def test_cert_manager_gives_each_broker_a_certificate() -> None:
    result = helm(
        "template",
        "kpo",
        str(CHART),
        "--namespace",
        "kafka",
        "--api-versions",
        "cert-manager.io/v1",
    )
    assert result.returncode == 0, result.stderr
    objects = [d for d in yaml.safe_load_all(result.stdout) if d]
    certificates = find(objects, "Certificate")
    brokers = [c for c in certificates if c["metadata"]["name"].startswith("kpo-broker-")]
    assert [c["spec"]["secretName"] for c in brokers] == [f"kpo-broker-{i}-tls" for i in range(3)]
    assert all("client auth" in c["spec"]["usages"] for c in brokers)
    assert not find(objects, "Secret", "-broker-tls")
    (sts,) = find(objects, "StatefulSet", "-broker")
    (tls,) = [v for v in sts["spec"]["template"]["spec"]["volumes"] if v["name"] == "tls"]
    names = [s["secret"]["name"] for s in tls["projected"]["sources"]]
    assert names == [f"kpo-broker-{i}-tls" for i in range(3)]


@pytest.mark.parametrize("value_set", ["default", "minimal"])
def test_plaintext_switch_turns_everything_off(value_set: str) -> None:
    objects = render(value_set, "security.plaintext=true")
    props = _properties(objects)
    assert props["listeners"] == "PLAINTEXT://0.0.0.0:9092"
    assert "zookeeper.set.acl" not in props and "listener.security.protocol.map" not in props
    assert not find(objects, "Secret") and not find(objects, "Job")


def test_the_rendered_plan_is_what_the_bootstrap_job_reads(tmp_path: Path) -> None:
    plan = _plan(render("default", "security.authorization.enabled=true"))
    parsed = SecurityPlan.from_json(plan)
    assert parsed.authorization is True
    by_name = {user.name: user for user in parsed.users}
    assert by_name["kpo-operator"].password_file == Path("/etc/kpo/users/operator/password")
    acls = acl_objects(by_name["kpo-helm-test"])
    assert {(a.principal, a.host, a.resource_pattern.resource_name) for a in acls} == {
        ("User:kpo-helm-test", "*", "kpo-helm-test")
    }
    assert len(acl_objects(by_name["kpo-operator"])) == 7
    bad = {
        "users": [
            {
                "name": "x",
                "passwordFile": "/p",
                "acls": [{"resourceType": "Topic", "resourceName": "t", "operation": "Fly"}],
            }
        ]
    }
    with pytest.raises(BootstrapError, match="unknown ACL value"):
        SecurityPlan.from_json(bad)
    with pytest.raises(BootstrapError, match="missing"):
        SecurityPlan.from_json({"users": [{"name": "x"}]})
