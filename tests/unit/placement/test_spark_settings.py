"""The Spark settings of the placement job's session, built without starting Spark."""

from __future__ import annotations

import pytest

from kpo_placement.aggregate import is_local_master, spark_settings


@pytest.mark.parametrize(
    "master", ["local", "local[*]", "local[2]", "local[4,3]", "local-cluster[2,1,1024]"]
)
def test_a_local_master_binds_the_driver_to_loopback_with_the_ui_off(master: str) -> None:
    assert is_local_master(master)
    settings = spark_settings(master)
    assert settings["spark.driver.bindAddress"] == "127.0.0.1"
    assert settings["spark.driver.host"] == "127.0.0.1"
    assert settings["spark.ui.enabled"] == "false"
    assert settings["spark.sql.session.timeZone"] == "UTC"


@pytest.mark.parametrize(
    "master", ["spark://10.0.0.5:7077", "k8s://https://api:6443", "yarn", None]
)
def test_a_cluster_master_leaves_the_driver_addresses_to_the_user(master: str | None) -> None:
    if master is not None:
        assert not is_local_master(master)
    settings = spark_settings(master)
    assert "spark.driver.bindAddress" not in settings
    assert "spark.driver.host" not in settings
    assert settings["spark.ui.enabled"] == "false"


def test_explicit_settings_override_the_defaults() -> None:
    settings = spark_settings(
        "local[2]",
        {
            "spark.ui.enabled": "true",
            "spark.driver.host": "node-a.example",
            "spark.driver.bindAddress": "0.0.0.0",
            "spark.executor.memory": "2g",
        },
    )
    assert settings["spark.ui.enabled"] == "true"
    assert settings["spark.driver.host"] == "node-a.example"
    assert settings["spark.driver.bindAddress"] == "0.0.0.0"
    assert settings["spark.executor.memory"] == "2g"


def test_cluster_addresses_given_by_the_user_are_kept() -> None:
    conf = {
        "spark.driver.host": "kpo-placement.kpo.svc",
        "spark.driver.port": "7078",
        "spark.blockManager.port": "7079",
    }
    settings = spark_settings("spark://spark-master:7077", conf)
    assert {k: settings[k] for k in conf} == conf
