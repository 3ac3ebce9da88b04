"""The chart's operator-only mode: the operator and the placement job beside an existing Kafka."""

from __future__ import annotations

import pytest

from tests.unit.charts.helm import CHART, find, helm, render

EXISTING = "kafka-0.kafka.prod:9093,kafka-1.kafka.prod:9093"
ESCAPED = EXISTING.replace(",", "\\,")  # --set splits on unescaped commas
BASE = ("mode=operator-only", f"operator.bootstrapServers={ESCAPED}")


def _placement_args(*sets: str) -> list[str]:
    (cron,) = find(render("default", *BASE, *sets), "CronJob", "-placement")
    (container,) = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    args: list[str] = container["args"]
    return args


def test_no_zookeeper_no_brokers_only_the_operator_and_placement() -> None:
    objects = render("default", *BASE, "placement.prometheusUrl=http://prometheus.mon:9090")
    kinds = {o["kind"] for o in objects}
    assert "StatefulSet" not in kinds and "Service" not in kinds and "Pod" not in kinds
    assert "PodDisruptionBudget" not in kinds
    assert not [o for o in objects if "zookeeper" in o["metadata"]["name"]]
    assert not [o for o in objects if o["metadata"]["name"].endswith("-broker-config")]
    (deploy,) = find(objects, "Deployment", "-operator")
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["KPO_BOOTSTRAP_SERVERS"] == EXISTING
    policies = {o["metadata"]["name"] for o in find(objects, "NetworkPolicy")}
    assert policies == {"kpo-operator"}


def test_secured_connection_comes_from_values_and_an_existing_secret() -> None:
    objects = render(
        "default",
        *BASE,
        "placement.enabled=false",
        "kafkaClient.securityProtocol=SASL_SSL",
        "kafkaClient.saslUsername=kpo-operator",
        "kafkaClient.secret.name=kafka-client",
        "kafkaClient.secret.caKey=ca.crt",
    )
    (deploy,) = find(objects, "Deployment", "-operator")
    spec = deploy["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env["KPO_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
    assert env["KPO_KAFKA_SASL_USERNAME"] == "kpo-operator"
    secrets = [v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v]
    assert secrets == ["kafka-client"]
    assert find(objects, "CronJob") == []


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        (
            ("placement.prometheusUrl=http://prometheus.mon:9090",),
            ["--prometheus-url=http://prometheus.mon:9090", "--window=300"],
        ),
        (
            ("placement.metricsUrls={0=http://k0:7071/metrics,1=http://k1:7071/metrics}",),
            ["--metrics-url=0=http://k0:7071/metrics", "--metrics-url=1=http://k1:7071/metrics"],
        ),
        (
            ("placement.metricsUrlTemplate=http://kafka-{id}.kafka:7071/metrics",),
            ["--metrics-url-template=http://kafka-{id}.kafka:7071/metrics"],
        ),
    ],
)
def test_placement_reads_the_metrics_source_given(
    sets: tuple[str, ...], expected: list[str]
) -> None:
    args = _placement_args(*sets)
    assert f"--bootstrap-server={EXISTING}" in args
    sources = [a for a in args if a.startswith(("--prometheus", "--metrics", "--window"))]
    assert sources == expected


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            ("mode=operator-only", "placement.enabled=false"),
            "operator.bootstrapServers is required",
        ),
        (BASE, "enable metrics or set placement.metricsUrlTemplate"),
        (("mode=kraft",), "/mode"),
        (("mode=operator-only", "placement.prometheusUrl=prom:9090"), "/placement/prometheusUrl"),
        ((*BASE, "placement.metricsUrls={k0:7071}"), "/placement/metricsUrls/0"),
    ],
)
def test_missing_or_wrong_settings_fail_naming_them(sets: tuple[str, ...], message: str) -> None:
    args: list[str] = []
    for item in sets:
        args += ["--set", item]
    result = helm("template", "t", str(CHART), *args)
    assert result.returncode != 0
    assert message in result.stderr


def test_lint_strict_passes_in_operator_only_mode() -> None:
    sets = [*BASE, "placement.prometheusUrl=http://prometheus.mon:9090"]
    args: list[str] = []
    for item in sets:
        args += ["--set", item]
    result = helm("lint", "--strict", str(CHART), *args)
    assert result.returncode == 0, result.stdout + result.stderr
