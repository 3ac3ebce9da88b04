"""The placement CronJob on a Spark cluster: master, scorer and Spark settings from values."""

from __future__ import annotations

import pytest

from tests.unit.charts.helm import find, render


def _container(*sets: str) -> dict:
    (cron,) = find(render("default", *sets), "CronJob", "-placement")
    (container,) = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    return container


def test_local_spark_by_default_numpy_scoring() -> None:
    container = _container()
    assert "--master=local[*]" in container["args"]
    assert "--scorer=numpy" in container["args"]
    assert not [a for a in container["args"] if a.startswith("--spark-conf")]
    assert "POD_IP" not in {e["name"] for e in container["env"]}


def test_standalone_cluster_gets_the_driver_address_and_the_settings() -> None:
    container = _container(
        "placement.sparkMaster=spark://spark-master.spark:7077",
        "placement.scorer=spark",
        "placement.sparkConf.spark\\.executor\\.memory=4g",
        "placement.sparkConf.spark\\.cores\\.max=8",
    )
    args = container["args"]
    assert "--master=spark://spark-master.spark:7077" in args
    assert "--scorer=spark" in args
    assert "--spark-conf=spark.executor.memory=4g" in args
    assert "--spark-conf=spark.cores.max=8" in args
    assert "--spark-conf=spark.driver.host=$(POD_IP)" in args  # expanded by the kubelet
    (pod_ip,) = [e for e in container["env"] if e["name"] == "POD_IP"]
    assert pod_ip["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}


@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ("placement.scorer=gpu", "/placement/scorer"),
        ("placement.sparkConf.executor\\.memory=4g", "propertyName .executor.memory."),
    ],
)
def test_bad_spark_values_are_refused(setting: str, field: str) -> None:
    with pytest.raises(AssertionError, match=field):
        render("default", setting)
