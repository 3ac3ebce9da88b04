"""TopicReplicaQuota on real parts: applied, updated, drift repaired, conflicts, deletion.

The lifecycle runs on our brokers and on Apache Kafka 4.x in KRaft mode (``flavor``)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest
import yaml

from kpo_kafka.admin import KafkaPythonAdmin
from kpo_kafka.admin_types import ConfigResource
from tests.integration.broker.conftest import wait_for
from tests.integration.broker.server.helpers import create_topic
from tests.integration.operator.conftest import (
    KAFKA4_KRAFT,
    KPO,
    FlavoredStack,
    Stack,
    StackFactory,
    throttle_configs,
)

pytestmark = pytest.mark.integration

MB = 1024 * 1024
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"


def quota(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kpo.dev/v1alpha1",
        "kind": "TopicReplicaQuota",
        "metadata": {"name": name},
        "spec": spec,
    }


def configs(stack: Stack) -> dict[str, dict[str, str]]:
    """Owned configs by resource name ("0", "1", "2" for brokers, topic names)."""
    return {r.name: v for r, v in throttle_configs(stack.cluster, "orders").items()}


def wait_configs(stack: Stack, expected: dict[str, dict[str, str]], timeout_s: float = 30) -> None:
    seen: list[dict[str, dict[str, str]]] = []

    def match() -> bool:
        seen.append(configs(stack))
        return seen[-1] == expected

    try:
        wait_for(match, timeout_s, "throttle configs")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: last {seen[-1:]} wanted {expected}") from exc


def conditions(stack: Stack, name: str) -> dict[str, dict[str, Any]]:
    status = stack.get("topicreplicaquotas", name).get("status") or {}
    return {c["type"]: c for c in status.get("conditions", [])}


@pytest.mark.parametrize("flavor", [KPO, KAFKA4_KRAFT])
def test_quota_lifecycle_drift_and_conflicts(flavored_stack: FlavoredStack, flavor: str) -> None:
    stack = flavored_stack(flavor)
    create_topic(stack.cluster, "orders", assignment={0: [0, 1], 1: [1, 2]})
    admin = KafkaPythonAdmin(stack.cluster.bootstrap_servers, "kpo-test", request_timeout_ms=10000)
    try:
        # A config the operator does not own stays as it is throughout.
        admin.incremental_alter_configs(
            {ConfigResource.topic("orders"): {"retention.ms": "3600000"}}
        )
        stack.apply(
            quota(
                "orders-throttle",
                topics={"names": ["orders"]},
                brokers=[0, 1],
                leaderReplicationThrottledRate=4 * MB,
                followerReplicationThrottledRate=4 * MB,
                leaderReplicationThrottledReplicas="0:0,1:1",
                followerReplicationThrottledReplicas="0:1",
            )
        )
        lists = {
            "leader.replication.throttled.replicas": "0:0,1:1",
            "follower.replication.throttled.replicas": "0:1",
        }
        rates4 = {LEADER_RATE: str(4 * MB), FOLLOWER_RATE: str(4 * MB)}
        wait_configs(stack, {"0": rates4, "1": rates4, "orders": lists})
        wait_for(
            lambda: conditions(stack, "orders-throttle")["Ready"]["status"] == "True", 30, "Ready"
        )
        status = stack.get("topicreplicaquotas", "orders-throttle")["status"]
        assert status["brokers"] == [
            {
                "brokerId": 0,
                "leaderReplicationThrottledRate": 4 * MB,
                "followerReplicationThrottledRate": 4 * MB,
            },
            {
                "brokerId": 1,
                "leaderReplicationThrottledRate": 4 * MB,
                "followerReplicationThrottledRate": 4 * MB,
            },
        ]
        assert status["topics"] == [
            {
                "topic": "orders",
                **{
                    "leaderReplicationThrottledReplicas": "0:0,1:1",
                    "followerReplicationThrottledReplicas": "0:1",
                },
            }
        ]
        assert status["observedGeneration"] == 1

        # Update: the new rate replaces the old one.
        stack.kubectl(
            "patch",
            "trq",
            "orders-throttle",
            "--type=merge",
            "-p",
            f'{{"spec":{{"leaderReplicationThrottledRate":{2 * MB}}}}}',
        )
        rates = {LEADER_RATE: str(2 * MB), FOLLOWER_RATE: str(4 * MB)}
        wait_configs(stack, {"0": rates, "1": rates, "orders": lists})

        # Drift: a hand-made change is put back within the timer period, with an Event.
        admin.incremental_alter_configs({ConfigResource.broker(0): {LEADER_RATE: "999"}})
        wait_configs(stack, {"0": rates, "1": rates, "orders": lists}, 30)
        wait_for(
            lambda: (
                "ThrottleDriftRepaired" in [e["reason"] for e in stack.events("orders-throttle")]
            ),
            15,
            "drift event",
        )

        # A second quota wanting a lower rate on broker 1: the lowest rate wins.
        stack.apply(
            quota(
                "cluster-cap",
                topics={"all": True},
                brokers=[1, 2],
                leaderReplicationThrottledRate=1 * MB,
            )
        )
        capped = {LEADER_RATE: str(1 * MB), FOLLOWER_RATE: str(4 * MB)}
        wait_configs(stack, {"0": rates, "1": capped, "2": {LEADER_RATE: str(MB)}, "orders": lists})

        def conflict_named() -> bool:
            cond = conditions(stack, "orders-throttle").get("RateConflict", {})
            return cond.get("status") == "True" and "cluster-cap wins" in cond.get("message", "")

        wait_for(conflict_named, 30, "RateConflict on the losing quota")
        winner = conditions(stack, "cluster-cap")["RateConflict"]
        assert winner["status"] == "True" and "the lowest rate wins" in winner["message"]
        assert "RateConflict" in [e["reason"] for e in stack.events("orders-throttle")]

        # Deleting the cap removes exactly what it set.
        stack.kubectl("delete", "trq", "cluster-cap", "--timeout=60s")
        wait_configs(stack, {"0": rates, "1": rates, "orders": lists})
        # Deleting the last quota removes every throttle config it set.
        stack.kubectl("delete", "trq", "orders-throttle", "--timeout=60s")
        wait_configs(stack, {})
        described = admin.describe_configs(topics=["orders"], keys=["retention.ms"])
        assert described[ConfigResource.topic("orders")] == {"retention.ms": "3600000"}
    finally:
        admin.close()


def test_quota_naming_a_missing_topic_says_so_until_it_is_created(stack: Stack) -> None:
    create_topic(stack.cluster, "orders", assignment={0: [0, 1]})
    stack.apply(
        quota(
            "ghost-throttle",
            topics={"names": ["orders", "ghost"]},
            leaderReplicationThrottledRate=4 * MB,
            leaderReplicationThrottledReplicas="0:0",
        )
    )
    rate = {LEADER_RATE: str(4 * MB)}
    lists = {"leader.replication.throttled.replicas": "0:0"}
    # What can be applied is: every live broker's rate and the existing topic's list.
    wait_configs(stack, {"0": rate, "1": rate, "2": rate, "orders": lists})

    def stalled() -> bool:
        cond = conditions(stack, "ghost-throttle").get("Stalled", {})
        return cond.get("status") == "True" and cond.get("reason") == "TopicNotFound"

    wait_for(stalled, 30, "Stalled TopicNotFound")
    found = conditions(stack, "ghost-throttle")
    assert found["Ready"]["status"] == "False"
    message = found["Stalled"]["message"]
    assert message.startswith("topics not found: ghost "), message
    assert "applied on 3 brokers and 1 topics" in message
    events = stack.events("ghost-throttle")
    assert [e["message"] for e in events if e["reason"] == "TopicNotFound"] == [message]
    assert not [e for e in events if e["reason"] == "Applied"]

    create_topic(stack.cluster, "ghost", assignment={0: [0, 1]})
    wait_for(lambda: conditions(stack, "ghost-throttle")["Ready"]["status"] == "True", 45, "Ready")
    ready = conditions(stack, "ghost-throttle")["Ready"]
    assert ready["message"] == "applied on 3 brokers and 2 topics"
    assert {r.name: v for r, v in throttle_configs(stack.cluster, "ghost").items()}["ghost"] == (
        lists
    )
    applied = [e["message"] for e in stack.events("ghost-throttle") if e["reason"] == "Applied"]
    assert applied == [ready["message"]]


def test_first_event_of_a_new_quota_agrees_with_its_status(stack: Stack) -> None:
    create_topic(stack.cluster, "orders", assignment={0: [0, 1]})
    stack.apply(
        quota("first", topics={"names": ["orders"]}, brokers=[0], leaderReplicationThrottledRate=MB)
    )
    wait_for(
        lambda: conditions(stack, "first").get("Ready", {}).get("status") == "True", 30, "Ready"
    )
    # A second quota while a recent sync (without it) exists: its timer may run first.
    stack.apply(
        quota(
            "second",
            topics={"names": ["orders"]},
            leaderReplicationThrottledRate=2 * MB,
            followerReplicationThrottledReplicas="0:1",
        )
    )
    wait_for(
        lambda: conditions(stack, "second").get("Ready", {}).get("status") == "True", 30, "Ready"
    )
    ready = conditions(stack, "second")["Ready"]
    assert ready["message"] == "applied on 3 brokers and 1 topics"
    applied = [e["message"] for e in stack.events("second") if e["reason"] == "Applied"]
    assert applied == [ready["message"]]


def test_replica_id_above_a_java_int_is_refused(stack: Stack) -> None:
    create_topic(stack.cluster, "orders", assignment={0: [0, 1]})
    manifest = quota(
        "huge-id",
        topics={"names": ["orders"]},
        leaderReplicationThrottledReplicas="99999999999999999999:1",
    )
    refused = stack.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(manifest), check=False)
    assert "leaderReplicationThrottledReplicas" in refused, refused
    assert not stack.exists("topicreplicaquotas", "huge-id")
    assert configs(stack) == {}


def test_a_quota_deleted_while_the_brokers_do_not_answer_goes_once_they_do(
    stack_factory: StackFactory,
) -> None:
    # The drift check and the delete handler both wait on unanswered Kafka requests. kopf
    # keeps the finalizer until the timer has exited; it must notice that within seconds
    # (TIMER_EXIT_POLL_S) rather than kopf's default 60 s, and the throttle must still go.
    stack = stack_factory(quota_interval_s=2.0)
    create_topic(stack.cluster, "orders", assignment={0: [0, 1]})
    stack.apply(
        quota("slow", topics={"names": ["orders"]}, brokers=[0], leaderReplicationThrottledRate=MB)
    )
    wait_configs(stack, {"0": {LEADER_RATE: str(MB)}})
    pids = [b.process.pid for b in stack.cluster.brokers.values()]
    assert all(pids)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(5.0)  # more than two intervals: the next drift check waits on the brokers
        stack.kubectl("delete", "topicreplicaquota", "slow", "--wait=false")
        time.sleep(2.0)
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    wait_for(lambda: not stack.exists("topicreplicaquotas", "slow"), 40, "the quota gone")
    wait_configs(stack, {})
