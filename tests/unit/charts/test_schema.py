"""values.schema.json refuses wrong values, naming the field; chart-level checks fail too."""

from __future__ import annotations

import pytest

from tests.unit.charts.helm import CHART, helm

BAD_VALUES = [
    ("broker.replicas=-1", "/broker/replicas"),
    ("zookeeper.replicas=0", "/zookeeper/replicas"),
    ("placement.mode=shuffle", "/placement/mode"),
    ("placement.action=maybe", "/placement/action"),
    ("broker.port=70000", "/broker/port"),
    ("metrics.port=0", "/metrics/port"),
    ("operator.livenessPort=-5", "/operator/livenessPort"),
    ("broker.rack.source=zone", "/broker/rack/source"),
    ("broker.storage.size=lots", "/broker/storage/size"),
    ("operator.bootstrapServers=nohostport", "/operator/bootstrapServers"),
    ("operator.watchNamespaces[0]=Bad_NS", "/operator/watchNamespaces/0"),
    ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
    ("broker.unknownKey=1", "unknownKey"),
    ("broker.config.broker\\.id=7", "/broker/config"),
    ("placement.sparkMaster=yarn", "/placement/sparkMaster"),
    ("kafkaClient.securityProtocol=TLS", "/kafkaClient/securityProtocol"),
    ("kafkaClient.saslMechanism=GSSAPI", "/kafkaClient/saslMechanism"),
    ("kafkaClient.secret.password=hunter2", "password"),
]


@pytest.mark.parametrize(("setting", "field"), BAD_VALUES)
@pytest.mark.parametrize("command", ["lint", "template"])
def test_wrong_value_is_refused_naming_the_field(command: str, setting: str, field: str) -> None:
    args = ["lint", "--strict", str(CHART)] if command == "lint" else ["template", "t", str(CHART)]
    result = helm(*args, "--set", setting)
    assert result.returncode != 0
    assert field in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (["broker.rack.source=static"], "broker.rack.racks must list at least one rack"),
        (["placement.mode=add-brokers"], "placement.brokers must list broker ids"),
        (["zookeeper.enabled=false"], "zookeeper.externalConnect is required"),
        (
            ["zookeeper.enabled=false", "zookeeper.externalConnect=zk-0.zk:2181"],
            "security.zookeeper.existingSecret (key password of the brokers' ZooKeeper SASL user)",
        ),
        (["metrics.enabled=false"], "enable metrics or set placement.metricsUrlTemplate"),
        (
            ["kafkaClient.securityProtocol=SASL_SSL"],
            "kafkaClient.securityProtocol SASL_SSL needs kafkaClient.saslUsername",
        ),
        (
            ["kafkaClient.securityProtocol=SSL", "kafkaClient.secret.caKey=ca.crt"],
            "need kafkaClient.secret.name",
        ),
        (
            [
                "kafkaClient.securityProtocol=SSL",
                "kafkaClient.secret.name=kafka-tls",
                "kafkaClient.secret.certificateKey=tls.crt",
            ],
            "certificateKey and privateKeyKey go together",
        ),
    ],
)
def test_inconsistent_values_fail_with_a_message(settings: list[str], message: str) -> None:
    args: list[str] = []
    for item in settings:
        args += ["--set", item]
    result = helm("template", "t", str(CHART), *args)
    assert result.returncode != 0
    assert message in result.stderr


def test_external_zookeeper_is_used_when_the_ensemble_is_off() -> None:
    result = helm(
        "template",
        "t",
        str(CHART),
        "--set",
        "zookeeper.enabled=false",
        "--set",
        "zookeeper.externalConnect=zk-0.zk:2181",
        "--set",
        "security.zookeeper.existingSecret=zk-sasl",
    )
    assert result.returncode == 0, result.stderr
    assert "zookeeper.connect=zk-0.zk:2181\n" in result.stdout
    assert "secretName: zk-sasl" in result.stdout  # the brokers' ZooKeeper SASL password
    assert "kind: StatefulSet\nmetadata:\n  name: t-kpo-zookeeper" not in result.stdout
