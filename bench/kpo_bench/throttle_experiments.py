"""Run the throttled-reassignment experiments against a running cluster.

For each experiment of :data:`kpo_bench.throttle_plan.EXPERIMENTS` (the same on both
systems):

1. Create each moved topic with one partition on its current replicas (RF 1) and
   fill it with ``workload.throttle_records`` records (ProducerPerformance, acks=1).
2. Set the throttles as ``kafka-reassign-partitions --throttle`` does (KIP-73): both
   rates (``workload.throttle_rate_bytes_s``) on every broker of the current and
   target replicas, and the topics' leader/follower throttled-replica lists.
3. Submit all moves in one AlterPartitionReassignments request and poll
   ListPartitionReassignments every :data:`POLL_INTERVAL_S` until none of the
   experiment's partitions is listed. The value is that time, from just before the
   submission, s.
4. Remove the throttles (as ``--verify`` does once the moves are done).

The brokers need ``replication.quota.window.num=2``
(:data:`kpo_bench.throttle_plan.THROTTLE_BROKER_PROPERTIES`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict

from kpo_bench.admin import BenchTimeoutError, admin_session, create_topic, partition_info
from kpo_bench.catch_up import partition_log_bytes
from kpo_bench.clusters import Cluster
from kpo_bench.java_tools import JavaTools, run_producer_perf
from kpo_bench.results import Measured
from kpo_bench.settings import Workload
from kpo_bench.throttle_plan import (
    FOLLOWER_REPLICAS_CONFIG,
    LEADER_REPLICAS_CONFIG,
    RATE_CONFIGS,
    ThrottleExperiment,
    copied_bytes,
    estimate_s,
    follower_replicas_value,
    involved_brokers,
    leader_replicas_value,
    throttled_followers,
    throttled_leaders,
)
from kpo_kafka.admin import KafkaAdmin
from kpo_kafka.admin_types import ConfigResource
from kpo_kafka.topic_partition import TopicPartition

POLL_INTERVAL_S = 0.1


class ReassignmentError(RuntimeError):
    """The cluster refused a reassignment or a throttle config, or ended with the wrong AR."""


def measure_throttled_moves(
    cluster: Cluster, tools: JavaTools, workload: Workload, experiment: ThrottleExperiment
) -> Measured:
    """Run ``experiment`` as the module docstring describes and return its duration, s.

    The details hold the estimate (``estimate_s``), the bytes copied, the throttled
    leaders and followers, and the fills' producer summaries.

    Raises:
        ReassignmentError: a reassignment or config change was refused, or a partition
            did not end on its target replicas.
        kpo_bench.admin.BenchTimeoutError: the moves did not finish within
            ``workload.throttle_timeout_s``.
        kpo_bench.java_tools.JavaToolError: a fill failed.
    """
    fills = {}
    with admin_session(cluster.bootstrap_servers) as admin:
        for move in experiment.moves:
            create_topic(
                admin,
                move.topic,
                assignment=[list(move.current)],
                config={"min.insync.replicas": "1"},
            )
    for move in experiment.moves:
        fills[move.topic] = asdict(
            run_producer_perf(
                tools,
                cluster.bootstrap_servers,
                move.topic,
                workload.throttle_records,
                workload.record_size,
                {**workload.producer_props, "acks": "1", "enable.idempotence": "false"},
                workload.tool_timeout_s(workload.throttle_bytes),
            )
        )
    sizes = {
        m.topic: partition_log_bytes(cluster.brokers[m.leader].log_dir, m.topic, m.partition)
        for m in experiment.moves
    }
    total = copied_bytes(experiment.moves, sizes)
    rate = workload.throttle_rate_bytes_s
    estimate = estimate_s(total, experiment.moves, rate)
    with admin_session(cluster.bootstrap_servers) as admin:
        _set_throttles(admin, experiment, rate)
        try:
            took = _move_and_wait(admin, experiment, workload.throttle_timeout_s)
        finally:
            _clear_throttles(admin, experiment)
        _check_targets(admin, experiment)
    details = {
        "estimate_s": estimate,
        "deviation": took / estimate - 1.0,
        "rate_bytes_s": rate,
        "copied_bytes": total,
        "leader_log_bytes": sizes,
        "throttled_leaders": sorted(throttled_leaders(experiment.moves)),
        "throttled_followers": sorted(throttled_followers(experiment.moves)),
        "moves": {m.topic: {"current": m.current, "target": m.target} for m in experiment.moves},
        "fills": fills,
    }
    return Measured(took, details)


def _alter_configs(
    admin: KafkaAdmin, changes: Mapping[ConfigResource, Mapping[str, str | None]]
) -> None:
    """Apply ``changes`` incrementally (IncrementalAlterConfigs), raising on any error."""
    failed = {
        f"{resource.kind.value}/{resource.name}": str(error)
        for resource, error in admin.incremental_alter_configs(changes).items()
        if error is not None
    }
    if failed:
        raise ReassignmentError(f"config change refused: {failed}")


def _set_throttles(admin: KafkaAdmin, experiment: ThrottleExperiment, rate: int) -> None:
    changes: dict[ConfigResource, dict[str, str | None]] = {
        ConfigResource.broker(b): {name: str(rate) for name in RATE_CONFIGS}
        for b in sorted(involved_brokers(experiment.moves))
    }
    for m in experiment.moves:
        changes[ConfigResource.topic(m.topic)] = {
            LEADER_REPLICAS_CONFIG: leader_replicas_value(m),
            FOLLOWER_REPLICAS_CONFIG: follower_replicas_value(m),
        }
    _alter_configs(admin, changes)


def _clear_throttles(admin: KafkaAdmin, experiment: ThrottleExperiment) -> None:
    changes: dict[ConfigResource, dict[str, str | None]] = {
        ConfigResource.broker(b): dict.fromkeys(RATE_CONFIGS)
        for b in sorted(involved_brokers(experiment.moves))
    }
    for m in experiment.moves:
        changes[ConfigResource.topic(m.topic)] = dict.fromkeys(
            (LEADER_REPLICAS_CONFIG, FOLLOWER_REPLICAS_CONFIG)
        )
    _alter_configs(admin, changes)


def _move_and_wait(admin: KafkaAdmin, experiment: ThrottleExperiment, timeout_s: float) -> float:
    """Submit the moves; return the seconds until ListPartitionReassignments omits them all."""
    ours = {TopicPartition(m.topic, m.partition) for m in experiment.moves}
    reassignments = {TopicPartition(m.topic, m.partition): m.target for m in experiment.moves}
    began = time.monotonic()
    refused = {
        tp: err for tp, err in admin.alter_partition_reassignments(reassignments).items() if err
    }
    if refused:
        raise ReassignmentError(f"reassignment refused: {refused}")
    deadline = began + timeout_s
    while True:
        ongoing = ours & set(admin.list_partition_reassignments())
        now = time.monotonic()
        if not ongoing:
            return now - began
        if now > deadline:
            raise BenchTimeoutError(
                f"{experiment.key}: still reassigning {sorted(map(str, ongoing))} after "
                f"{timeout_s:.0f} s"
            )
        time.sleep(POLL_INTERVAL_S)


def _check_targets(admin: KafkaAdmin, experiment: ThrottleExperiment) -> None:
    for move in experiment.moves:
        state = partition_info(admin, move.topic, move.partition)
        if state is None or set(state.replicas) != set(move.target):
            raise ReassignmentError(
                f"{move.topic}: replicas {state} after the move, not {move.target}"
            )
