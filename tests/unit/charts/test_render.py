"""The chart as helm renders it: lint-clean for three value sets, workload shape, secure pods."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kpo_devenv.pki import generate_kafka_pki
from kpo_kafka.client_config import client_security_from_env
from tests.conftest import REPO_ROOT
from tests.unit.charts.helm import CHART, VALUE_SETS, find, helm, pod_specs, render, value_args

ALL_SETS = sorted(VALUE_SETS)


@pytest.mark.parametrize("value_set", ALL_SETS)
def test_helm_lint_strict_passes(value_set: str) -> None:
    result = helm("lint", "--strict", str(CHART), *value_args(value_set))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("value_set", ALL_SETS)
def test_every_container_has_the_secure_defaults_and_requests(value_set: str) -> None:
    specs = pod_specs(render(value_set))
    assert len(specs) >= 3
    for label, spec in specs:
        pod_sc = spec["securityContext"]
        assert pod_sc["runAsNonRoot"] is True, label
        assert pod_sc["runAsUser"] > 0, label
        assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}, label
        for container in spec.get("initContainers", []) + spec["containers"]:
            where = f"{label} container {container['name']}"
            sc = container["securityContext"]
            assert sc["runAsNonRoot"] is True, where
            assert sc["readOnlyRootFilesystem"] is True, where
            assert sc["allowPrivilegeEscalation"] is False, where
            assert sc["capabilities"] == {"drop": ["ALL"]}, where
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, where
            requests = container["resources"]["requests"]
            assert requests.get("cpu") and requests.get("memory"), where


@pytest.mark.parametrize("value_set", ALL_SETS)
def test_broker_id_is_the_pod_ordinal_and_listeners_use_pod_dns(value_set: str) -> None:
    (sts,) = find(render(value_set, namespace="ns1"), "StatefulSet", "-broker")
    (broker,) = sts["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in broker["env"]}
    assert env["KAFKA_BROKER_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.labels['apps.kubernetes.io/pod-index']"
    )
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    host = f"$(POD_NAME).{sts['spec']['serviceName']}.ns1.svc.cluster.local"
    assert env["KAFKA_ADVERTISED_LISTENERS"]["value"] == (
        f"CLIENT://{host}:9092,INTERNAL://{host}:9093"
    )
    assert broker["command"] == ["python", "-m", "kpo_broker", "/var/run/kpo/server.properties"]
    assert broker["lifecycle"]["preStop"]["exec"]["command"][-1].startswith("kill -TERM 1")
    assert broker["readinessProbe"]["tcpSocket"] == {"port": "kafka"}
    assert broker["livenessProbe"]["tcpSocket"] == {"port": "kafka"}


def test_broker_headless_service_pdb_and_one_claim_per_broker() -> None:
    objects = render("big")
    (sts,) = find(objects, "StatefulSet", "-broker")
    assert sts["spec"]["replicas"] == 6
    (headless,) = find(objects, "Service", "-broker-headless")
    assert headless["spec"]["clusterIP"] == "None"
    assert sts["spec"]["serviceName"] == headless["metadata"]["name"]
    (pdb,) = find(objects, "PodDisruptionBudget", "-broker")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == sts["spec"]["selector"]["matchLabels"]
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["storageClassName"] == "fast-ssd"
    assert claim["spec"]["resources"]["requests"]["storage"] == "500Gi"


def test_zookeeper_ensemble_size_and_broker_connect_string() -> None:
    objects = render("big")
    (zk,) = find(objects, "StatefulSet", "-zookeeper")
    assert zk["spec"]["replicas"] == 5
    config = find(objects, "ConfigMap", "-zookeeper")[0]["data"]["zoo.cfg"]
    assert [line.split("=")[0] for line in config.splitlines() if line.startswith("server.")] == [
        f"server.{i}" for i in range(1, 6)
    ]
    props = find(objects, "ConfigMap", "-broker")[0]["data"]["server.properties"]
    (connect,) = [line for line in props.splitlines() if line.startswith("zookeeper.connect=")]
    assert connect.count(":2181") == 5 and connect.endswith("/kafka")


def test_rack_from_a_node_label_gives_the_brokers_get_nodes_only() -> None:
    objects = render("big")
    (role,) = find(objects, "ClusterRole", "-node-reader")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    spec = find(objects, "StatefulSet", "-broker")[0]["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False
    (init,) = spec["initContainers"]
    env = {e["name"]: e for e in init["env"]}
    assert env["RACK_SOURCE"]["value"] == "nodeLabel"
    assert env["NODE_LABEL"]["value"] == "topology.kubernetes.io/zone"
    assert "kube-api-access" in {m["name"] for m in init["volumeMounts"]}
    assert "kube-api-access" not in {m["name"] for m in spec["containers"][0]["volumeMounts"]}


def test_static_racks_and_no_rbac_for_the_brokers_otherwise() -> None:
    objects = render("minimal")
    assert find(objects, "ClusterRole", "-node-reader") == []
    assert find(objects, "ConfigMap", "-broker")[0]["data"]["racks"] == "rack-a"
    props = find(objects, "ConfigMap", "-broker")[0]["data"]["server.properties"]
    assert "metrics.port" not in props


def test_metrics_service_and_scrape_annotations_follow_the_metrics_switch() -> None:
    on, off = render("default"), render("minimal")
    assert len(find(on, "Service", "-broker-metrics")) == 1
    annotations = find(on, "StatefulSet", "-broker")[0]["spec"]["template"]["metadata"]
    assert annotations["annotations"]["prometheus.io/port"] == "9308"
    assert find(off, "Service", "-broker-metrics") == []
    assert (
        "prometheus.io/scrape"
        not in (
            find(off, "StatefulSet", "-broker")[0]["spec"]["template"]["metadata"]["annotations"]
        )
    )


def test_network_policies_follow_their_switch() -> None:
    names = {o["metadata"]["name"] for o in find(render("default"), "NetworkPolicy")}
    assert names == {"kpo-zookeeper", "kpo-broker", "kpo-operator"}
    assert find(render("minimal"), "NetworkPolicy") == []


def test_operator_deployment_settings() -> None:
    (deploy,) = find(render("big", namespace="kafka"), "Deployment", "-operator")
    assert deploy["spec"]["replicas"] == 1
    assert deploy["spec"]["strategy"]["type"] == "Recreate"
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["KPO_BOOTSTRAP_SERVERS"] == "kpo-broker.kafka.svc.cluster.local:9092"
    assert env["KPO_NAMESPACES"] == "kafka,kafka-apps"
    assert env["KPO_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["KPO_THROTTLE_LEDGER"] == "kpo-operator-throttle-ledger"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"


@pytest.mark.parametrize(
    ("value_set", "expected"),
    [
        ("default", ["--mode=rebalance", "--master=local[*]"]),
        ("big", ["--mode=remove-brokers", "--brokers=5", "--apply", "--namespace=kafka"]),
    ],
)
def test_placement_cronjob_arguments(value_set: str, expected: list[str]) -> None:
    (cron,) = find(render(value_set), "CronJob")
    spec = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    args = spec["containers"][0]["args"]
    for arg in expected:
        assert arg in args
    assert ("--apply" in args) is (value_set == "big")
    assert spec["automountServiceAccountToken"] is (value_set == "big")


def test_helm_test_hook_produces_and_consumes() -> None:
    (pod,) = find(render("default"), "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    script = pod["spec"]["containers"][0]["command"][-1]
    assert "KafkaProducer" in script and "KafkaConsumer" in script


def test_gitops_quotas_are_topic_replica_quotas() -> None:
    quota_dir = REPO_ROOT / "deploy" / "gitops" / "quotas"
    quotas = [yaml.safe_load(p.read_text()) for p in sorted(quota_dir.glob("*-throttle.yaml"))]
    assert len(quotas) >= 2
    assert {q["kind"] for q in quotas} == {"TopicReplicaQuota"}
    listed = yaml.safe_load((quota_dir / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(p.name for p in quota_dir.glob("*-throttle.yaml"))


SECURED = (
    "kafkaClient.securityProtocol=SASL_SSL",
    "kafkaClient.saslUsername=kpo-operator",
    "kafkaClient.secret.name=kafka-client",
    "kafkaClient.secret.caKey=ca.crt",
    "kafkaClient.secret.certificateKey=tls.crt",
    "kafkaClient.secret.privateKeyKey=tls.key",
)


def _kafka_client(spec: dict[str, object]) -> tuple[dict[str, object], list[object], list[object]]:
    (container,) = spec["containers"]  # type: ignore[misc]
    env = {e["name"]: e.get("value") for e in container["env"] if e["name"].startswith("KPO_KAFKA")}
    return env, container["volumeMounts"], spec["volumes"]  # type: ignore[return-value]


def test_kafka_client_security_comes_from_a_mounted_secret(tmp_path: Path) -> None:
    objects = render("default", *SECURED)
    (deploy,) = find(objects, "Deployment", "-operator")
    (cron,) = find(objects, "CronJob")
    specs = [
        deploy["spec"]["template"]["spec"],
        cron["spec"]["jobTemplate"]["spec"]["template"]["spec"],
    ]
    for spec in specs:
        env, mounts, volumes = _kafka_client(spec)
        assert env == {
            "KPO_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "KPO_KAFKA_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM": "https",
            "KPO_KAFKA_SSL_TRUSTSTORE_TYPE": "PEM",
            "KPO_KAFKA_SSL_TRUSTSTORE_LOCATION": "/etc/kpo/kafka-client/ca.crt",
            "KPO_KAFKA_SSL_KEYSTORE_TYPE": "PEM",
            "KPO_KAFKA_SSL_KEYSTORE_CERTIFICATE_CHAIN_FILE": "/etc/kpo/kafka-client/tls.crt",
            "KPO_KAFKA_SSL_KEYSTORE_KEY_FILE": "/etc/kpo/kafka-client/tls.key",
            "KPO_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
            "KPO_KAFKA_SASL_USERNAME": "kpo-operator",
            "KPO_KAFKA_SASL_PASSWORD_FILE": "/etc/kpo/kafka-client/password",
        }
        assert {
            "name": "kafka-client",
            "mountPath": "/etc/kpo/kafka-client",
            "readOnly": True,
        } in mounts
        assert {
            "name": "kafka-client",
            "secret": {"secretName": "kafka-client", "defaultMode": 0o440},
        } in volumes
    # The operator accepts the rendered variables, with the Secret's keys as files.
    pki = generate_kafka_pki(tmp_path / "pki")
    client = pki.client("kpo-operator")
    folder = tmp_path / "secret"
    folder.mkdir()
    (folder / "ca.crt").write_text(pki.ca.cert.read_text())
    (folder / "tls.crt").write_text(client.cert.read_text())
    (folder / "tls.key").write_text(client.key.read_text())
    (folder / "password").write_text("operator-password")
    mounted = {k: str(v).replace("/etc/kpo/kafka-client", str(folder)) for k, v in env.items()}
    security = client_security_from_env(mounted)
    assert security.describe() == "SASL_SSL, SCRAM-SHA-512 as kpo-operator, client certificate"
    assert security.kafka_python_kwargs()["sasl_plain_password"] == "operator-password"


def test_kafka_client_defaults_to_the_fleets_scram_user_or_plaintext() -> None:
    objects = render("default")
    (deploy,) = find(objects, "Deployment", "-operator")
    env, mounts, volumes = _kafka_client(deploy["spec"]["template"]["spec"])
    assert env == {
        "KPO_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "KPO_KAFKA_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM": "https",
        "KPO_KAFKA_SSL_TRUSTSTORE_TYPE": "PEM",
        "KPO_KAFKA_SSL_TRUSTSTORE_LOCATION": "/etc/kpo/kafka-client/ca.crt",
        "KPO_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "KPO_KAFKA_SASL_USERNAME": "kpo-operator",
        "KPO_KAFKA_SASL_PASSWORD_FILE": "/etc/kpo/kafka-client/password",
    }
    (volume,) = [v for v in volumes if v["name"] == "kafka-client"]  # type: ignore[index]
    assert volume["projected"]["sources"] == [  # type: ignore[index]
        {
            "secret": {
                "name": "kpo-user-operator",
                "items": [{"key": "password", "path": "password"}],
            }
        },
        {"secret": {"name": "kpo-broker-tls", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    ]
    (cron,) = find(objects, "CronJob")
    env, _, _ = _kafka_client(cron["spec"]["jobTemplate"]["spec"]["template"]["spec"])
    assert env["KPO_KAFKA_SASL_USERNAME"] == "kpo-placement"
    plain = render("default", "security.plaintext=true")
    (deploy,) = find(plain, "Deployment", "-operator")
    env, mounts, volumes = _kafka_client(deploy["spec"]["template"]["spec"])
    assert env == {}
    assert all(m["name"] != "kafka-client" for m in mounts)  # type: ignore[index]
    assert all(v["name"] != "kafka-client" for v in volumes)  # type: ignore[index]
    off = render("default", "kafkaClient.securityProtocol=SSL", "kafkaClient.verifyHostname=false")
    (deploy,) = find(off, "Deployment", "-operator")
    env, _, _ = _kafka_client(deploy["spec"]["template"]["spec"])
    assert env == {
        "KPO_KAFKA_SECURITY_PROTOCOL": "SSL",
        "KPO_KAFKA_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM": "",
    }
