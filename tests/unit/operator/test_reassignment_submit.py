"""ReassignmentReconciler: accepting, throttling, submitting, tracking and completing.

A throttled object sets its throttles first and is submitted with
AlterPartitionReassignments (KIP-455) on the next step, once brokers have the
configs (``kafka-reassign-partitions --throttle``, KIP-73); without a throttle
change it is submitted in the same step. Progress is measured from replica sizes
(DescribeLogDirs, KIP-113); completion removes the object's throttles. With
concurrency limits (Cruise Control's ``num.concurrent.partition.movements.per.broker`` and
``num.concurrent.leader.movements``) the partitions are submitted in batches as the
movements in flight finish.
"""

from __future__ import annotations

from typing import Any

from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.quota import QuotaReconciler
from kpo_operator.throttles import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
)
from tests.unit.operator.reassignment_env import (
    NS,
    RATES_1000,
    T0,
    T1,
    U0,
    Env,
    conditions,
    entry_of,
    no_throttles,
    partition_states,
    reassignment,
    refuse_config_writes,
)


def test_throttled_object_sets_throttles_first_and_submits_on_the_next_step(env: Env) -> None:
    env.create("move", [("t", 0, [2, 1])], throttle={"replicationRate": 1000})

    assert env.reconcile() == "Moving"

    # Step 1: the accepted target is written (Pending) and the throttles set; no submission.
    assert env.submissions() == []
    assert env.in_flight() == {}
    # kafka-reassign-partitions --throttle: leaders = the current replicas (OAR), followers =
    # the adding ones, rates on every broker that leads or receives the moving partition.
    assert env.topic_config("t") == {LEADER_REPLICAS: "0:0,0:1", FOLLOWER_REPLICAS: "0:2"}
    for broker in (0, 1, 2):
        assert env.broker_config(broker) == RATES_1000
    assert env.broker_config(3) == {} and env.topic_config("u") == {}
    status = env.status()
    assert status["phase"] == "Moving"
    assert status["observedGeneration"] == 1
    assert status["startTime"] == "2024-05-01T12:00:00Z"
    assert status["throttle"] == {"replicationRate": 1000}
    assert partition_states(status) == {T0: "Pending"}
    entry = entry_of(status, T0)
    assert entry["originalReplicas"] == [0, 1] and entry["targetReplicas"] == [2, 1]
    assert [e.reason for e in env.store.events_of("move")] == ["Accepted"]

    mark = env.mark()
    env.clock.advance(5)
    assert env.reconcile() == "Moving"

    # Step 2: submitted, throttles untouched.
    assert env.writes(mark) == [("alter_partition_reassignments", {T0: [2, 1]})]
    assert env.in_flight() == {T0: (2, 1)}
    status = env.status()
    assert partition_states(status) == {T0: "Moving"}
    assert status["startTime"] == "2024-05-01T12:00:00Z"
    assert status["throttle"] == {"replicationRate": 1000}
    assert conditions(status) == {
        "Ready": "False",
        "Reconciling": "True",
        "Stalled": "False",
        "Completed": "False",
    }
    events = env.store.events_of("move")
    assert [e.reason for e in events] == ["Accepted", "Submitted"]
    assert events[-1].type == "Normal" and events[-1].message == "submitted 1 partitions"

    assert env.reconcile() == "Moving"
    assert env.submissions() == [{T0: [2, 1]}]


def test_unthrottled_object_is_submitted_in_the_same_step(env: Env) -> None:
    env.create("move", [("t", 0, [2, 0])])

    assert env.reconcile() == "Moving"

    assert env.writes() == [("alter_partition_reassignments", {T0: [2, 0]})]
    status = env.status()
    assert partition_states(status) == {T0: "Moving"}
    assert "throttle" not in status
    assert [e.reason for e in env.store.events_of("move")] == ["Accepted", "Submitted"]


def test_throttles_already_in_place_submit_in_the_same_step(env: Env) -> None:
    # A quota already throttles every replica of t at the same rate on brokers 0-2.
    env.store.apply(
        {
            "apiVersion": "kpo.dev/v1alpha1",
            "kind": "TopicReplicaQuota",
            "metadata": {"name": "q", "namespace": NS},
            "spec": {
                "topics": {"names": ["t"]},
                "brokers": [0, 1, 2],
                "leaderReplicationThrottledRate": 1000,
                "followerReplicationThrottledRate": 1000,
                "leaderReplicationThrottledReplicas": "*",
                "followerReplicationThrottledReplicas": "*",
            },
        }
    )
    QuotaReconciler(env.store, env.writer, now=env.clock.now).reconcile(NS, "q")
    mark = env.mark()
    env.create("move", [("t", 0, [2, 1])], throttle={"replicationRate": 1000})

    assert env.reconcile() == "Moving"

    assert env.writes(mark) == [("alter_partition_reassignments", {T0: [2, 1]})]
    assert partition_states(env.status()) == {T0: "Moving"}
    assert env.status()["throttle"] == {"replicationRate": 1000}


def test_reconcile_while_moving_does_not_resubmit_and_patches_only_changes(moving: Env) -> None:
    assert moving.reconcile() == "Moving"
    patches = moving.store.status_patches
    for _ in range(3):
        assert moving.reconcile() == "Moving"
    assert moving.submissions() == [{T0: [2, 1]}]
    assert moving.store.status_patches == patches
    status = moving.status()
    assert status["totals"]["partitions"] == 1 and status["totals"]["partitionsDone"] == 0


def test_progress_bytes_rate_and_eta_follow_the_replica_sizes(moving: Env) -> None:
    moving.kafka.set_size(0, "t", 0, 10_000)  # the leader's log
    assert moving.reconcile() == "Moving"
    totals = moving.status()["totals"]
    assert (totals["bytesDone"], totals["bytesTotal"], totals["progress"]) == (0, 10_000, "0%")
    assert moving.status()["predictedDuration"] == "10s"  # 10000 bytes at 1000 bytes/s

    moving.clock.advance(10)
    moving.kafka.set_size(2, "t", 0, 4_000)  # the adding replica copied 4000 bytes
    assert moving.reconcile() == "Moving"

    status = moving.status()
    assert status["totals"] == {
        "partitions": 1,
        "partitionsDone": 0,
        "bytesDone": 4_000,
        "bytesTotal": 10_000,
        "progress": "40%",
        "rate": 400,
    }
    entry = entry_of(status, T0)
    assert (entry["bytesDone"], entry["bytesTotal"]) == (4_000, 10_000)
    assert entry["addingReplicas"] == [2] and entry["removingReplicas"] == [0]
    # Throttled, Kafka's quota window (11 x 1 s) is replayed: the 4000 bytes seen use 4000 of
    # the 10000+ bytes a window allows at 1000 bytes/s, so the quota holds nothing back; the
    # copy was never seen faster than 400 bytes/s, so the 6000 left take 15 s.
    assert status["eta"] == "2024-05-01T12:00:25Z"
    assert status["predictedDuration"] == "6s"
    assert moving.submissions() == [{T0: [2, 1]}]


def test_eta_is_absent_when_nothing_remains_to_copy(moving: Env) -> None:
    moving.kafka.set_size(0, "t", 0, 10_000)
    assert moving.reconcile() == "Moving"
    moving.clock.advance(10)
    moving.kafka.set_size(2, "t", 0, 4_000)
    assert moving.reconcile() == "Moving"
    assert "eta" in moving.status()

    moving.clock.advance(10)
    moving.kafka.set_size(2, "t", 0, 10_000)  # copied, not yet in the ISR
    assert moving.reconcile() == "Moving"

    status = moving.status()
    assert status["totals"]["bytesDone"] == status["totals"]["bytesTotal"] == 10_000
    assert status["totals"]["partitionsDone"] == 0
    assert "eta" not in status and "predictedDuration" not in status


def test_completion_removes_throttles_elects_and_completes(env: Env) -> None:
    env.create(
        "move",
        [("t", 0, [2, 0])],
        throttle={"replicationRate": 1000},
        preferredLeaderElection=True,
    )
    assert env.reconcile() == "Moving"
    assert env.reconcile() == "Moving"
    assert env.broker_config(2)
    env.kafka.complete(T0)
    assert env.kafka.partitions[T0].leader == 0  # 0 is still a replica: no election yet

    assert env.reconcile() == "Completed"

    assert no_throttles(env)
    assert ("elect_preferred_leaders", [T0]) in env.kafka.calls
    assert env.kafka.partitions[T0].leader == 2
    status = env.status()
    assert status["phase"] == "Completed"
    assert partition_states(status) == {T0: "Completed"}
    assert status["completionTime"] == "2024-05-01T12:00:00Z"
    assert "eta" not in status and "predictedDuration" not in status
    assert conditions(status) == {
        "Ready": "True",
        "Reconciling": "False",
        "Stalled": "False",
        "Completed": "True",
    }
    reasons = [e.reason for e in env.store.events_of("move")]
    assert reasons[-2:] == ["PreferredLeaderElection", "Completed"]
    # Completed is final: nothing more is read or written.
    mark, patches = env.mark(), env.store.status_patches
    assert env.reconcile() == "Completed"
    assert env.kafka.calls[mark:] == [] and env.store.status_patches == patches
    assert env.finalize() is True


def test_completion_without_election_leaves_the_leader(env: Env) -> None:
    env.create("move", [("t", 0, [2, 0])])
    assert env.reconcile() == "Moving"
    assert env.writes() == [("alter_partition_reassignments", {T0: [2, 0]})]  # no throttle
    env.kafka.complete()
    assert env.reconcile() == "Completed"
    assert all(c != "elect_preferred_leaders" for c, _ in env.kafka.calls)
    assert env.kafka.partitions[T0].leader == 0


def test_throttle_removal_refused_at_completion_is_retried(moving: Env) -> None:
    moving.kafka.complete()
    refuse_config_writes(moving, times=1)

    assert moving.reconcile() == "Moving"

    status = moving.status()
    assert status["message"].startswith("all partitions done; removing throttles failed")
    assert "POLICY_VIOLATION" in status["message"]
    assert partition_states(status) == {T0: "Completed"}
    assert "completionTime" not in status
    assert moving.broker_config(2) == RATES_1000
    assert moving.store.events_of("move", "Completed") == []

    assert moving.reconcile() == "Completed"
    assert no_throttles(moving)
    assert len(moving.store.events_of("move", "Completed")) == 1
    assert moving.submissions() == [{T0: [2, 1]}]


def test_partition_refused_by_kafka_fails_that_partition(env: Env) -> None:
    env.create("move", [("t", 0, [2, 1]), ("t", 1, [3, 2])])
    submit = env.kafka.alter_partition_reassignments

    def broker_3_dies_first(targets: Any) -> Any:
        env.kafka.brokers.pop(3, None)  # between validation and submission
        return submit(targets)

    env.kafka.alter_partition_reassignments = broker_3_dies_first  # type: ignore[method-assign]
    assert env.reconcile() == "Moving"
    env.kafka.alter_partition_reassignments = submit  # type: ignore[method-assign]

    assert partition_states(env.status()) == {T0: "Moving", T1: "Failed"}
    submitted = env.store.events_of("move", "Submitted")[-1]
    assert (
        submitted.type == "Warning" and "t-1: INVALID_REPLICA_ASSIGNMENT (39)" in submitted.message
    )
    env.kafka.complete()
    assert env.reconcile() == "Failed"
    assert "t-1: INVALID_REPLICA_ASSIGNMENT (39)" in env.status()["message"]
    assert partition_states(env.status()) == {T0: "Completed", T1: "Failed"}


def test_log_dir_targets_gate_completion(env: Env) -> None:
    obj = reassignment("move", [("t", 0, [2, 1])], throttle={"logDirMoveRate": 500})
    obj["spec"]["partitions"][0]["logDirs"] = ["/data/broker-2/d1", "any"]
    env.store.apply(obj)

    assert env.reconcile() == "Moving"  # throttles first
    assert env.broker_config(2) == {"replica.alter.log.dirs.io.max.bytes.per.second": "500"}
    assert env.broker_config(1) == {}
    assert env.submissions() == []
    status = env.status()
    assert status["throttle"] == {"logDirMoveRate": 500}
    assert entry_of(status, T0)["targetLogDirs"] == ["/data/broker-2/d1", "any"]

    assert env.reconcile() == "Moving"  # submitted, replica placed in the named log dir
    assert env.submissions() == [{T0: [2, 1]}]
    assert ("alter_replica_log_dirs", {(2, "t", 0): "/data/broker-2/d1"}) in env.kafka.calls

    env.kafka.complete()  # the inter-broker move is done, the intra-broker one is not
    assert env.reconcile() == "Moving"
    env.kafka.finish_log_dir_moves()
    assert env.reconcile() == "Completed"
    assert env.kafka.configs == {}
    assert entry_of(env.status(), T0)["targetLogDirs"] == ["/data/broker-2/d1", "any"]


def test_accepted_log_dirs_still_gate_completion_after_a_rejected_edit(env: Env) -> None:
    obj = reassignment("move", [("t", 0, [2, 1])])
    obj["spec"]["partitions"][0]["logDirs"] = ["/data/broker-2/d1", "any"]
    env.store.apply(obj)
    assert env.reconcile() == "Moving"  # no throttle: submitted at once
    env.edit("move", partitions=[{"topic": "t", "partition": 0, "replicas": [7, 1]}])

    assert env.reconcile() == "Moving"  # rejected; the accepted dirs are kept
    env.kafka.complete()
    assert env.reconcile() == "Moving"

    assert entry_of(env.status(), T0)["targetLogDirs"] == ["/data/broker-2/d1", "any"]
    assert env.kafka.future_dirs == {(2, "t", 0): "/data/broker-2/d1"}
    env.kafka.finish_log_dir_moves()
    assert env.reconcile() == "Failed"  # the edit is still invalid when the work ends
    assert partition_states(env.status()) == {T0: "Completed"}
    assert env.kafka.dirs[(2, "t", 0)] == "/data/broker-2/d1"


def test_failed_preferred_leader_election_is_reported(env: Env) -> None:
    env.create("move", [("t", 0, [2, 0])], preferredLeaderElection=True)
    assert env.reconcile() == "Moving"
    env.kafka.complete()
    env.kafka.partitions[T0].isr = [0]  # the preferred replica fell out of the ISR

    assert env.reconcile() == "Completed"

    [event] = env.store.events_of("move", "PreferredLeaderElectionFailed")
    assert event.type == "Warning" and "t-0" in event.message
    assert "preferred leader election failed" in env.status()["message"]
    assert env.kafka.partitions[T0].leader == 0


def test_rates_are_set_on_every_broker_of_both_moving_partitions(env: Env) -> None:
    env.create("move", [("t", 0, [2, 1]), ("t", 1, [3, 2])], throttle={"replicationRate": 1000})
    assert env.reconcile() == "Moving"
    assert env.topic_config("t") == {
        LEADER_REPLICAS: "0:0,0:1,1:1,1:2",
        FOLLOWER_REPLICAS: "0:2,1:3",
    }
    for broker in range(4):
        assert env.broker_config(broker) == {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"}
    assert partition_states(env.status()) == {T0: "Pending", T1: "Pending"}
    assert env.reconcile() == "Moving"
    assert env.submissions() == [{T0: [2, 1], T1: [3, 2]}]


# -- concurrency limits (Cruise Control's executor, Strimzi's KafkaRebalance) -----------------

W = [TopicPartition("w", p) for p in range(4)]
PER_BROKER_2 = "waiting: concurrentPartitionMovementsPerBroker 2 reached on brokers 0, 3"


def create_w(env: Env, partitions: int = 4) -> None:
    """Topic ``w``: every partition on [0, 1], led by 0."""
    env.kafka.create_topic("w", {p: [0, 1] for p in range(partitions)})


def into_3(partitions: int = 4) -> list[tuple[str, int, list[int]]]:
    """Targets moving each ``w`` partition's replica from broker 0 to broker 3."""
    return [("w", p, [3, 1]) for p in range(partitions)]


def test_per_broker_limit_submits_in_batches_as_movements_finish(env: Env) -> None:
    create_w(env)
    env.create("move", into_3(), concurrentPartitionMovementsPerBroker=2)

    assert env.reconcile() == "Moving"

    # In the spec's order, while brokers 0 and 3 have fewer than 2 movements each.
    assert env.submissions() == [{W[0]: [3, 1], W[1]: [3, 1]}]
    status = env.status()
    assert partition_states(status) == {
        W[0]: "Moving",
        W[1]: "Moving",
        W[2]: "Pending",
        W[3]: "Pending",
    }
    assert entry_of(status, W[2])["message"] == PER_BROKER_2
    assert status["message"].endswith("; 2 partitions waiting to be submitted")
    submitted = env.store.events_of("move", "Submitted")[-1]
    assert submitted.message == "submitted 2 partitions; 2 wait for the concurrency limits"

    # Nothing finished: nothing more is submitted, and no throttle is synced for it.
    mark = env.mark()
    assert env.reconcile() == "Moving"
    assert env.writes(mark) == []

    env.kafka.complete(W[0])
    env.restart()  # what waits is in the status, not in the operator's memory
    assert env.reconcile() == "Moving"

    assert env.submissions(mark) == [{W[2]: [3, 1]}]
    status = env.status()
    assert partition_states(status)[W[2]] == "Moving"
    assert "message" not in entry_of(status, W[2])
    assert entry_of(status, W[3])["message"] == PER_BROKER_2
    assert status["message"].endswith("; 1 partitions waiting to be submitted")

    env.kafka.complete(W[1])
    env.kafka.complete(W[2])
    assert env.reconcile() == "Moving"
    assert env.submissions(mark) == [{W[2]: [3, 1]}, {W[3]: [3, 1]}]
    assert "waiting" not in env.status()["message"]

    env.kafka.complete(W[3])
    assert env.reconcile() == "Completed"
    assert len(env.submissions()) == 3
    assert all(env.kafka.partitions[tp].replicas == [3, 1] for tp in W)


def test_other_movements_in_flight_count_against_the_per_broker_limit(env: Env) -> None:
    create_w(env, 3)
    # Another tool moves t-1 [1,2] -> [3,2]: one movement on brokers 1 and 3 (topic t is
    # not in this object's snapshot).
    env.kafka.alter_partition_reassignments({T1: [3, 2]})
    mark = env.mark()
    env.create("move", into_3(3), concurrentPartitionMovementsPerBroker=2)

    assert env.reconcile() == "Moving"

    assert env.submissions(mark) == [{W[0]: [3, 1]}]
    waiting = "waiting: concurrentPartitionMovementsPerBroker 2 reached on broker 3"
    assert entry_of(env.status(), W[1])["message"] == waiting

    env.kafka.complete(T1)
    assert env.reconcile() == "Moving"
    assert env.submissions(mark) == [{W[0]: [3, 1]}, {W[1]: [3, 1]}]
    assert entry_of(env.status(), W[2])["message"] == PER_BROKER_2


def test_with_nothing_in_flight_an_object_submits_one_partition_above_the_limit(env: Env) -> None:
    create_w(env, 2)
    env.kafka.alter_partition_reassignments({T1: [3, 2]})  # holds broker 3, however long
    mark = env.mark()
    env.create("move", into_3(2), concurrentPartitionMovementsPerBroker=1)

    assert env.reconcile() == "Moving"

    # Broker 3 is at the limit with another tool's movement: the first partition goes all
    # the same (no deadlock), the second waits for it.
    assert env.submissions(mark) == [{W[0]: [3, 1]}]
    waiting = "waiting: concurrentPartitionMovementsPerBroker 1 reached on brokers 0, 3"
    assert entry_of(env.status(), W[1])["message"] == waiting

    env.kafka.complete(W[0])
    assert env.reconcile() == "Moving"
    assert env.submissions(mark) == [{W[0]: [3, 1]}, {W[1]: [3, 1]}]
    env.kafka.complete(W[1])
    assert env.reconcile() == "Completed"
    assert env.in_flight() == {T1: (3, 2)}


def test_leader_limit_holds_partitions_whose_leader_moves(env: Env) -> None:
    create_w(env, 3)
    targets = [("w", 0, [2, 3]), ("w", 1, [2, 3]), ("w", 2, [0, 3])]  # leader 0 leaves w-0, w-1
    env.create("move", targets, concurrentLeaderMovements=1)

    assert env.reconcile() == "Moving"

    assert env.submissions() == [{W[0]: [2, 3], W[2]: [0, 3]}]
    status = env.status()
    assert partition_states(status)[W[1]] == "Pending"
    assert entry_of(status, W[1])["message"] == "waiting: concurrentLeaderMovements 1 reached"

    env.kafka.complete(W[2])  # keeps its leader: frees nothing
    assert env.reconcile() == "Moving"
    assert len(env.submissions()) == 1

    env.kafka.complete(W[0])
    assert env.reconcile() == "Moving"
    assert env.submissions()[1:] == [{W[1]: [2, 3]}]
    env.kafka.complete(W[1])
    assert env.reconcile() == "Completed"


def test_throttles_cover_every_accepted_partition_while_some_wait(env: Env) -> None:
    create_w(env, 3)
    env.create(
        "move",
        into_3(3),
        throttle={"replicationRate": 1000},
        concurrentPartitionMovementsPerBroker=1,
    )

    assert env.reconcile() == "Moving"  # throttles first

    assert env.submissions() == []
    assert env.topic_config("w") == {
        LEADER_REPLICAS: "0:0,0:1,1:0,1:1,2:0,2:1",
        FOLLOWER_REPLICAS: "0:3,1:3,2:3",
    }
    assert env.broker_config(3) == RATES_1000

    assert env.reconcile() == "Moving"
    assert env.submissions() == [{W[0]: [3, 1]}]
    assert partition_states(env.status()) == {W[0]: "Moving", W[1]: "Pending", W[2]: "Pending"}
    assert env.topic_config("w")[FOLLOWER_REPLICAS] == "0:3,1:3,2:3"

    env.kafka.complete(W[0])
    assert env.reconcile() == "Moving"
    assert env.submissions() == [{W[0]: [3, 1]}, {W[1]: [3, 1]}]
    for tp in W[1:3]:
        env.kafka.complete(tp)
        env.reconcile()
    assert env.reconcile() == "Completed"
    assert no_throttles(env)


def test_edited_limits_apply_from_the_next_step_without_resubmitting(env: Env) -> None:
    create_w(env)
    env.create("move", into_3(), concurrentPartitionMovementsPerBroker=1)
    assert env.reconcile() == "Moving"
    assert env.submissions() == [{W[0]: [3, 1]}]

    env.edit("move", concurrentPartitionMovementsPerBroker=3)
    mark = env.mark()
    assert env.reconcile() == "Moving"

    assert env.submissions(mark) == [{W[1]: [3, 1], W[2]: [3, 1]}]  # w-0 stays in flight
    status = env.status()
    assert status["observedGeneration"] == 2
    assert entry_of(status, W[3])["message"] == (
        "waiting: concurrentPartitionMovementsPerBroker 3 reached on brokers 0, 3"
    )

    env.edit("move", concurrentPartitionMovementsPerBroker=None)
    assert env.reconcile() == "Moving"
    assert env.submissions(mark) == [{W[1]: [3, 1], W[2]: [3, 1]}, {W[3]: [3, 1]}]
    assert all(e.get("message") is None for e in env.status()["partitions"])


def test_limits_hold_while_the_spec_is_invalid(env: Env) -> None:
    create_w(env, 3)
    env.create("move", into_3(3), concurrentPartitionMovementsPerBroker=1)
    assert env.reconcile() == "Moving"
    env.edit("move", suspend="no")  # not a boolean: the spec does not parse

    env.kafka.complete(W[0])
    assert env.reconcile() == "Moving"

    # The accepted work keeps moving, one partition at a time as the limit says.
    assert env.submissions() == [{W[0]: [3, 1]}, {W[1]: [3, 1]}]
    assert partition_states(env.status())[W[2]] == "Pending"


def test_a_move_without_throttle_waits_for_no_throttle_sync(moving: Env) -> None:
    """Neither its start nor its end changes the throttles: no sync of its own either way."""
    moving.create("quick", [("u", 0, [0, 3])])
    mark = moving.mark()
    assert moving.reconcile("quick") == "Moving"
    assert moving.in_flight()[U0] == (0, 3)
    moving.kafka.complete(U0)
    assert moving.reconcile("quick") == "Completed"
    calls = moving.calls(mark)
    assert "describe_configs" not in calls and "incremental_alter_configs" not in calls
    assert moving.broker_config(2) == RATES_1000  # the throttled move's, untouched


def test_a_move_without_throttle_syncs_while_the_last_sync_is_unknown(env: Env) -> None:
    """Before any sync, or after one that failed, it is not known what is in place."""
    env.create("quick", [("u", 0, [0, 3])])
    mark = env.mark()
    assert env.reconcile("quick") == "Moving"
    assert "describe_configs" in env.calls(mark)
