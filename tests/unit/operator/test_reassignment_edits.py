"""ReassignmentReconciler: edits of a Moving object, applied as an incremental reassignment.

A changed target is resubmitted (Kafka keeps the original replicas, KIP-455); a
partition dropped from the spec gets its OAR as new target (no data moves, the
adding replicas go); a new partition is submitted; a throttle change is re-applied.
When the throttle configs change, the submission waits for the next step. An
invalid edit is not applied and changes nothing in the cluster.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.throttles import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
)
from tests.unit.operator.reassignment_env import (
    RATES_1000,
    T0,
    T1,
    U0,
    Env,
    entry_of,
    no_throttles,
    partition_states,
    start_moving,
    start_moving_two,
)


def test_incremental_edit_resubmits_changed_and_reverts_removed(env: Env) -> None:
    start_moving_two(env)
    env.edit("move", partitions=[{"topic": "t", "partition": 0, "replicas": [3, 1]}])
    mark = env.mark()

    assert env.reconcile() == "Moving"

    # Step 1: new targets accepted (t-1 back to its OAR), throttles follow them; no submission.
    assert env.submissions(mark) == []
    assert env.in_flight() == {T0: (2, 1), T1: (3, 2)}
    assert "0:3" in env.topic_config("t")[FOLLOWER_REPLICAS].split(",")
    assert env.broker_config(3) == RATES_1000
    status = env.status()
    assert status["observedGeneration"] == 2
    assert partition_states(status) == {T0: "Pending", T1: "Pending"}
    t0, t1 = entry_of(status, T0), entry_of(status, T1)
    assert t0["originalReplicas"] == [0, 1] and t0["targetReplicas"] == [3, 1]
    assert t1["originalReplicas"] == [1, 2] and t1["targetReplicas"] == [1, 2]

    assert env.reconcile() == "Moving"

    # Step 2: both submitted; t-1 reverts through a new target, not a cancellation.
    assert env.submissions(mark) == [{T0: [3, 1], T1: [1, 2]}]
    assert env.in_flight() == {T0: (3, 1)}
    assert env.kafka.partitions[T1].replicas == [1, 2]
    assert env.kafka.partitions[T0].original == [0, 1]  # Kafka keeps OAR (KIP-455)
    assert env.store.events_of("move", "Submitted")[-1].message == "submitted 2 partitions"

    env.clock.advance(31)  # the next periodic throttle re-sync
    assert env.reconcile() == "Moving"
    assert partition_states(env.status()) == {T0: "Moving", T1: "Completed"}
    assert len(env.submissions()) == 2
    # Throttles of t-0's new target only: broker 2 leads or receives nothing any more.
    assert env.topic_config("t") == {LEADER_REPLICAS: "0:0,0:1", FOLLOWER_REPLICAS: "0:3"}
    assert env.broker_config(2) == {}
    assert env.broker_config(3) == {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"}
    env.kafka.complete()
    assert env.reconcile() == "Completed"
    assert env.kafka.partitions[T0].replicas == [3, 1]


def test_dropped_partition_is_reverted_to_its_original_replicas_by_a_new_target(
    env: Env,
) -> None:
    env.create("move", [("t", 0, [2, 1]), ("t", 1, [3, 2])])  # no throttle: one step each
    assert env.reconcile() == "Moving"
    assert env.in_flight() == {T0: (2, 1), T1: (3, 2)}
    env.edit("move", partitions=[{"topic": "t", "partition": 0, "replicas": [2, 1]}])
    mark = env.mark()

    assert env.reconcile() == "Moving"

    assert env.submissions(mark) == [{T1: [1, 2]}]  # a new target (OAR), not a None cancel
    assert env.in_flight() == {T0: (2, 1)}
    assert env.kafka.partitions[T1].replicas == [1, 2]  # OAR order kept: same leader
    t1 = entry_of(env.status(), T1)
    assert (t1["state"], t1["targetReplicas"], t1["originalReplicas"]) == (
        "Moving",
        [1, 2],
        [1, 2],
    )
    assert env.reconcile() == "Moving"
    assert partition_states(env.status()) == {T0: "Moving", T1: "Completed"}

    env.kafka.complete()
    assert env.reconcile() == "Completed"
    status = env.status()
    assert partition_states(status) == {T0: "Completed", T1: "Completed"}
    assert entry_of(status, T1)["targetReplicas"] == [1, 2]
    assert all(None not in s.values() for s in env.submissions() if isinstance(s, dict))


def test_edit_that_keeps_the_throttles_is_resubmitted_in_the_same_step(moving: Env) -> None:
    # [2, 0] adds the same replica (2) to the same OAR: no throttle config changes.
    moving.edit("move", partitions=[{"topic": "t", "partition": 0, "replicas": [2, 0]}])
    mark = moving.mark()

    assert moving.reconcile() == "Moving"

    assert moving.writes(mark) == [("alter_partition_reassignments", {T0: [2, 0]})]
    assert moving.in_flight() == {T0: (2, 0)}
    assert partition_states(moving.status()) == {T0: "Moving"}
    assert entry_of(moving.status(), T0)["targetReplicas"] == [2, 0]


def test_throttle_edit_while_moving_is_applied(moving: Env) -> None:
    moving.edit("move", throttle={"replicationRate": 500})
    assert moving.reconcile() == "Moving"
    assert moving.broker_config(0) == {LEADER_RATE: "500", FOLLOWER_RATE: "500"}
    assert moving.status()["throttle"] == {"replicationRate": 500}
    assert moving.status()["observedGeneration"] == 2
    assert len(moving.submissions()) == 1


def test_edit_removing_the_throttle_clears_status_throttle_and_configs(moving: Env) -> None:
    moving.kafka.set_size(0, "t", 0, 10_000)
    assert moving.reconcile() == "Moving"
    assert moving.status()["predictedDuration"] == "10s"
    moving.edit("move", throttle=None)

    assert moving.reconcile() == "Moving"

    assert no_throttles(moving)
    status = moving.status()
    assert "throttle" not in status
    assert "predictedDuration" not in status  # no throttle: no prediction
    assert status["observedGeneration"] == 2
    assert moving.in_flight() == {T0: (2, 1)}
    assert len(moving.submissions()) == 1
    assert moving.reconcile() == "Moving"
    assert no_throttles(moving)  # the periodic re-sync does not bring them back
    moving.kafka.complete()
    assert moving.reconcile() == "Completed"


def test_invalid_edit_while_moving_is_rejected_and_tracking_goes_on(moving: Env) -> None:
    moving.edit("move", partitions=[{"topic": "t", "partition": 0, "replicas": [7, 1]}])
    mark = moving.mark()

    assert moving.reconcile() == "Moving"
    assert moving.reconcile() == "Moving"

    assert moving.submissions(mark) == []
    assert moving.in_flight() == {T0: (2, 1)}
    [event] = moving.store.events_of("move", "EditRejected")
    assert event.type == "Warning" and "broker 7 is not alive" in event.message
    status = moving.status()
    assert status["message"].startswith("edit not applied")
    assert status["observedGeneration"] == 1
    assert partition_states(status) == {T0: "Moving"}
    assert moving.broker_config(2) == RATES_1000

    # The accepted target finishes; the edit is still invalid: the object ends Failed.
    moving.kafka.complete()
    assert moving.reconcile() == "Failed"
    assert moving.kafka.partitions[T0].replicas == [2, 1]
    assert no_throttles(moving)
    assert partition_states(moving.status()) == {T0: "Completed"}
    assert "broker 7 is not alive" in moving.status()["message"]


def test_rejected_edit_does_not_change_the_throttles_of_the_accepted_targets(
    moving: Env,
) -> None:
    moving.create("other", [("t", 1, [3, 2])], throttle={"replicationRate": 1000})
    moving.edit(
        "move",
        partitions=[{"topic": "t", "partition": 0, "replicas": [7, 1]}],
        throttle={"replicationRate": 10},
    )
    assert moving.reconcile() == "Moving"  # rejected: t-0 keeps moving to [2, 1]
    assert moving.reconcile("other") == "Moving"  # syncs every contribution

    assert moving.in_flight()[T0] == (2, 1)
    # The adding replica 2 of t-0 stays throttled as a follower, at the accepted rate.
    assert moving.topic_config("t")[FOLLOWER_REPLICAS] == "0:2,1:3"
    assert moving.broker_config(2) == RATES_1000
    assert moving.status()["throttle"] == {"replicationRate": 1000}


def test_partition_added_while_moving_is_submitted(moving: Env) -> None:
    moving.edit(
        "move",
        partitions=[
            {"topic": "t", "partition": 0, "replicas": [2, 1]},
            {"topic": "u", "partition": 0, "replicas": [3, 0]},
        ],
    )
    assert moving.reconcile() == "Moving"  # u-0's throttles first
    assert moving.topic_config("u") == {LEADER_REPLICAS: "0:2,0:3", FOLLOWER_REPLICAS: "0:0"}
    assert moving.submissions() == [{T0: [2, 1]}]
    assert partition_states(moving.status()) == {T0: "Moving", U0: "Pending"}

    assert moving.reconcile() == "Moving"
    assert moving.submissions() == [{T0: [2, 1]}, {U0: [3, 0]}]
    assert partition_states(moving.status()) == {T0: "Moving", U0: "Moving"}


def test_suspend_while_moving_does_not_pause(moving: Env) -> None:
    moving.edit("move", suspend=True)
    assert moving.reconcile() == "Moving"
    assert moving.in_flight() == {T0: (2, 1)}


def test_retry_after_failure_clears_the_completion_time(moving: Env) -> None:
    moving.kafka.alter_partition_reassignments({T0: None})
    assert moving.reconcile() == "Failed"
    assert "completionTime" in moving.status()
    moving.edit("move", partitions=[{"topic": "t", "partition": 0, "replicas": [3, 1]}])

    assert moving.reconcile() == "Moving"
    assert "completionTime" not in moving.status()
    assert partition_states(moving.status()) == {T0: "Pending"}

    assert moving.reconcile() == "Moving"
    assert moving.submissions()[-1] == {T0: [3, 1]}
    assert "completionTime" not in moving.status()


def _change_target(env: Env) -> None:
    start_moving(env)
    env.edit("move", partitions=[{"topic": "t", "partition": 0, "replicas": [3, 1]}])


def _drop_partition(env: Env) -> None:
    start_moving_two(env)
    env.edit("move", partitions=[{"topic": "t", "partition": 0, "replicas": [2, 1]}])


@pytest.mark.parametrize(
    ("edit", "tp", "adding"),
    [(_change_target, T0, 2), (_drop_partition, T1, 3)],
    ids=["changed-target", "dropped-partition"],
)
def test_replica_still_added_towards_the_older_target_stays_throttled(
    env: Env, edit: Callable[[Env], None], tp: TopicPartition, adding: int
) -> None:
    edit(env)
    assert env.kafka.list_partition_reassignments()[tp].adding == (adding,)

    assert env.reconcile() == "Moving"  # step 1 of the edit

    # Whatever Kafka is adding right now is throttled (kafka-reassign-partitions throttles
    # the replicas of an ongoing move as well as those of the new target).
    ongoing = env.kafka.list_partition_reassignments().get(tp)
    now_adding = ongoing.adding if ongoing else ()
    followers = set(env.topic_config("t").get(FOLLOWER_REPLICAS, "").split(","))
    assert {f"{tp[1]}:{b}" for b in now_adding} <= followers
    for broker in now_adding:
        assert env.broker_config(broker) == RATES_1000
