"""The replica manager (Kafka's ReplicaManager) over real logs, the controller faked in memory.

LeaderAndIsr and StopReplica fencing, the leader's ISR expansion and shrink through
changes the controller accepts or refuses (AlterPartition, KIP-497), and the high
watermark checkpoint across a restart.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from kafka import errors as kafka_errors

from kpo_broker.log.config import LogConfig
from kpo_broker.log.dir_failure import KafkaStorageError
from kpo_broker.log.manager import LogManager
from kpo_broker.server import replica_manager as replica_manager_module
from kpo_broker.server.alter_partition_manager import IsrChangeAbandonedError
from kpo_broker.server.errors import (
    FencedLeaderEpochError,
    NotLeaderOrFollowerError,
    StaleControllerEpochError,
    UnknownLeaderEpochError,
)
from kpo_broker.server.produce import ProduceResult, append_records
from kpo_broker.server.replica_manager import ReplicaManager, now_ms
from kpo_kafka.topic_partition import TopicPartition
from tests.unit.broker.log.batches import make_value_batch
from tests.unit.broker.server.replicas import (
    InMemoryIsrWriter,
    OpenBroker,
    hosted,
    leader_and_isr,
)

TP = TopicPartition("orders", 0)
OTHER = TopicPartition("orders", 1)
AUDIT = TopicPartition("audit", 0)


def _append(rm: ReplicaManager, tp: TopicPartition, count: int) -> None:
    hosted(rm, tp).append_records_to_leader(make_value_batch(count), 1, 1, now_ms())


# ------------------------------------------------------------------- LeaderAndIsr


def test_leader_and_isr_creates_the_log_and_makes_this_broker_leader(
    open_broker: OpenBroker,
) -> None:
    rm = open_broker(0)
    results = rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0, 1, 2), leader_epoch=3)})
    assert results[TP].error_code == 0
    assert results[TP].became_leader and not results[TP].became_follower
    partition = hosted(rm, TP)
    assert partition.is_leader
    assert (partition.leader_epoch, partition.isr, partition.replicas) == (3, (0, 1, 2), (0, 1, 2))
    assert rm.log_manager.get_log("orders", 0) is partition.log
    # The new leader epoch starts at the LEO (KIP-101).
    assert partition.log.leader_epoch_cache.latest_entry == (3, 0)


def test_leader_and_isr_makes_followers_and_reports_leader_changes(
    open_broker: OpenBroker,
) -> None:
    rm = open_broker(1)
    first = rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0, 1), leader_epoch=1)})
    assert first[TP].became_follower and not first[TP].became_leader
    assert not hosted(rm, TP).is_leader
    moved = rm.become_leader_or_follower(1, {TP: leader_and_isr(2, (2, 1), leader_epoch=2)})
    assert moved[TP].became_follower
    assert hosted(rm, TP).leader_id == 2
    promoted = rm.become_leader_or_follower(1, {TP: leader_and_isr(1, (2, 1), leader_epoch=3)})
    assert promoted[TP].became_leader
    assert hosted(rm, TP).is_leader


def test_a_leader_epoch_not_newer_than_the_one_held_is_stale(open_broker: OpenBroker) -> None:
    rm = open_broker(0)
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0, 1), leader_epoch=5)})
    stale = kafka_errors.StaleControllerEpochError.errno
    for epoch in (5, 4):
        results = rm.become_leader_or_follower(
            1, {TP: leader_and_isr(1, (0, 1), leader_epoch=epoch)}
        )
        assert results[TP].error_code == stale
    partition = hosted(rm, TP)
    assert (partition.leader_id, partition.leader_epoch) == (0, 5)  # unchanged


def test_a_partition_not_assigned_to_this_broker_is_refused(open_broker: OpenBroker) -> None:
    rm = open_broker(0)
    results = rm.become_leader_or_follower(
        1, {TP: leader_and_isr(1, (1, 2)), OTHER: leader_and_isr(0, (0, 1))}
    )
    assert results[TP].error_code == kafka_errors.UnknownTopicOrPartitionError.errno
    assert results[OTHER].error_code == 0
    assert rm.get_partition(TP) is None
    assert rm.log_manager.get_log("orders", 0) is None


def test_requests_of_an_older_controller_are_fenced(open_broker: OpenBroker) -> None:
    rm = open_broker(0)
    rm.become_leader_or_follower(7, {TP: leader_and_isr(0, (0,), leader_epoch=1)})
    with pytest.raises(StaleControllerEpochError):
        rm.become_leader_or_follower(6, {TP: leader_and_isr(0, (0,), leader_epoch=2)})
    assert hosted(rm, TP).leader_epoch == 1
    with pytest.raises(StaleControllerEpochError):
        rm.stop_replicas(6, [(TP, True)])
    assert rm.get_partition(TP) is not None
    # A newer controller is accepted and becomes the fence.
    rm.become_leader_or_follower(8, {TP: leader_and_isr(0, (0,), leader_epoch=2)})
    assert rm.controller_epoch == 8
    with pytest.raises(StaleControllerEpochError):
        rm.check_controller_epoch(7)


def test_leader_partition_checks_hosting_leadership_and_epoch(open_broker: OpenBroker) -> None:
    rm = open_broker(0)
    rm.become_leader_or_follower(
        1,
        {
            TP: leader_and_isr(0, (0, 1), leader_epoch=4),
            OTHER: leader_and_isr(1, (0, 1), leader_epoch=4),
        },
    )
    assert rm.leader_partition(TP) is hosted(rm, TP)
    assert rm.leader_partition(TP, 4) is hosted(rm, TP)
    with pytest.raises(FencedLeaderEpochError):
        rm.leader_partition(TP, 3)
    with pytest.raises(UnknownLeaderEpochError):
        rm.leader_partition(TP, 5)
    with pytest.raises(NotLeaderOrFollowerError):
        rm.leader_partition(OTHER)
    with pytest.raises(kafka_errors.UnknownTopicOrPartitionError):
        rm.leader_partition(AUDIT)
    # Known to the metadata but not hosted here (e.g. a reassignment removed this replica):
    # NOT_LEADER_OR_FOLLOWER, so the client refreshes its metadata (getPartitionOrError).
    rm.known_partition = lambda tp: tp == AUDIT
    with pytest.raises(kafka_errors.NotLeaderForPartitionError):
        rm.leader_partition(AUDIT)


def test_leader_and_isr_wakes_requests_waiting_on_the_partition(open_broker: OpenBroker) -> None:
    rm = open_broker(0)
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0,), leader_epoch=1)})

    async def scenario() -> bool:
        waiter = asyncio.create_task(rm.watchers.wait([TP], 5))
        await asyncio.sleep(0.01)
        rm.become_leader_or_follower(1, {TP: leader_and_isr(1, (0, 1), leader_epoch=2)})
        return await waiter

    assert asyncio.run(scenario()) is True


# -------------------------------------------------------------------- StopReplica


def test_stop_replica_keeps_the_log_and_the_high_watermark(open_broker: OpenBroker) -> None:
    rm = open_broker(0)
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0,), leader_epoch=1)})
    _append(rm, TP, 3)
    assert hosted(rm, TP).high_watermark == 3  # ISR of one: committed at once
    assert rm.stop_replicas(1, [(TP, False)]) == {TP: 0}
    assert rm.get_partition(TP) is None
    assert rm.log_manager.get_log("orders", 0) is not None
    # Hosted again (e.g. as a follower after a reassignment): the HW comes back.
    rm.become_leader_or_follower(1, {TP: leader_and_isr(1, (1, 0), leader_epoch=2)})
    assert hosted(rm, TP).high_watermark == 3
    assert hosted(rm, TP).log_end_offset == 3


def test_stop_replica_with_delete_removes_the_log_and_the_topic_counters(
    open_broker: OpenBroker,
) -> None:
    rm = open_broker(0)
    rm.become_leader_or_follower(
        1,
        {
            TP: leader_and_isr(0, (0,), leader_epoch=1),
            OTHER: leader_and_isr(0, (0,), leader_epoch=1),
        },
    )
    _append(rm, TP, 2)
    rm.topic_stats.record_produce("orders", 100, 2)
    log_dir = hosted(rm, TP).log.dir
    assert rm.stop_replicas(1, [(TP, True)]) == {TP: 0}
    assert rm.log_manager.get_log("orders", 0) is None
    assert not log_dir.exists()
    assert rm.topic_stats.topic("orders").bytes_in == 100  # orders-1 is still hosted
    rm.stop_replicas(1, [(OTHER, True)])
    assert rm.topic_stats.topic("orders").bytes_in == 0  # the topic's counters are gone
    # A partition that is not hosted stops without error (StopReplica is idempotent).
    assert rm.stop_replicas(1, [(AUDIT, True)]) == {AUDIT: 0}
    # Re-created from scratch: no HW survives the deletion.
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0,), leader_epoch=2)})
    assert (hosted(rm, TP).high_watermark, hosted(rm, TP).log_end_offset) == (0, 0)


def test_high_watermarks_survive_a_restart_through_the_checkpoint(
    open_broker: OpenBroker,
) -> None:
    rm = open_broker(0)
    rm.become_leader_or_follower(
        1,
        {
            TP: leader_and_isr(0, (0,), leader_epoch=1),
            AUDIT: leader_and_isr(0, (0, 1), leader_epoch=1),
        },
    )
    _append(rm, TP, 4)
    _append(rm, AUDIT, 2)  # follower 1 never fetched: the HW stays at 0
    rm.checkpoint_high_watermarks()
    rm.log_manager.shutdown()

    restarted = open_broker(0)
    restarted.become_leader_or_follower(
        2,
        {
            TP: leader_and_isr(1, (0, 1), leader_epoch=2),
            AUDIT: leader_and_isr(1, (0, 1), leader_epoch=2),
        },
    )
    assert hosted(restarted, TP).high_watermark == 4
    assert hosted(restarted, AUDIT).high_watermark == 0
    assert hosted(restarted, AUDIT).log_end_offset == 2


# ---------------------------------------------------------------------------- ISR


def _lead_with_follower(
    open_broker: OpenBroker, writer: InMemoryIsrWriter, **kwargs: int
) -> ReplicaManager:
    """Broker 0 leads TP with replicas (0, 1) and ISR (0,); three records appended."""
    rm = open_broker(0, writer, **kwargs)
    rm.become_leader_or_follower(
        1, {TP: leader_and_isr(0, (0, 1), isr=(0,), leader_epoch=1, partition_epoch=4)}
    )
    _append(rm, TP, 3)
    return rm


def test_a_follower_that_caught_up_joins_the_isr_once_the_controller_accepts(
    open_broker: OpenBroker,
) -> None:
    writer = InMemoryIsrWriter()
    rm = _lead_with_follower(open_broker, writer)
    partition = hosted(rm, TP)
    assert partition.high_watermark == 3  # ISR (0,): the leader's LEO
    partition.update_follower_fetch_state(1, 2, now_ms())
    asyncio.run(rm.maybe_expand_isr(TP, partition, 1))
    assert writer.writes == []  # LEO 2 is below the HW: not caught up
    partition.update_follower_fetch_state(1, 3, now_ms())
    asyncio.run(rm.maybe_expand_isr(TP, partition, 1))
    assert writer.writes == [(TP, (0, 1))]
    assert partition.isr == (0, 1)
    assert partition.partition_epoch == 5  # the new partition epoch, for the next change


def test_an_isr_change_the_controller_refuses_leaves_the_isr_to_the_controller(
    open_broker: OpenBroker,
) -> None:
    writer = InMemoryIsrWriter()
    rm = _lead_with_follower(open_broker, writer)
    writer.partition_epochs[TP] = 9  # the controller rewrote the state meanwhile
    partition = hosted(rm, TP)
    partition.update_follower_fetch_state(1, 3, now_ms())
    asyncio.run(rm.maybe_expand_isr(TP, partition, 1))
    assert partition.isr == (0,)
    assert partition.partition_epoch == 4
    # Nothing stays pending: the next LeaderAndIsr brings the state, or a retry may win.
    assert partition.pending_isr is None
    writer.partition_epochs[TP] = 4
    asyncio.run(rm.maybe_expand_isr(TP, partition, 1))
    assert partition.isr == (0, 1)


def test_an_isr_write_that_fails_changes_nothing(open_broker: OpenBroker) -> None:
    writer = InMemoryIsrWriter()
    rm = _lead_with_follower(open_broker, writer)
    writer.fail_with = ConnectionError("the controller is unreachable")
    partition = hosted(rm, TP)
    partition.update_follower_fetch_state(1, 3, now_ms())
    asyncio.run(rm.maybe_expand_isr(TP, partition, 1))
    assert partition.isr == (0,)
    assert partition.pending_isr is None


def test_an_isr_change_abandoned_at_shutdown_changes_nothing(
    open_broker: OpenBroker, caplog: pytest.LogCaptureFixture
) -> None:
    writer = InMemoryIsrWriter()
    rm = _lead_with_follower(open_broker, writer)
    writer.fail_with = IsrChangeAbandonedError("broker stopping")
    partition = hosted(rm, TP)
    partition.update_follower_fetch_state(1, 3, now_ms())
    with caplog.at_level(logging.INFO, "kpo_broker.server.replica_manager"):
        asyncio.run(rm.maybe_expand_isr(TP, partition, 1))
    assert partition.isr == (0,)
    assert partition.pending_isr is None
    assert "not answered: broker stopping" in caplog.text
    assert "Traceback" not in caplog.text


def test_a_zombie_leader_never_acknowledges_acks_all_records_on_its_own(
    open_broker: OpenBroker,
) -> None:
    """A leader whose session expired is replaced; its ISR shrink to itself is fenced.

    Its followers stopped fetching (they follow the new leader), so its ISR shrink would
    leave it alone in the ISR and let the HW pass records no other replica holds. The
    controller rewrote the state (a newer partition epoch), so it refuses the change:
    the ISR, the HW and the acks=all produce stay put until the LeaderAndIsr with the new
    leader epoch arrives, which fails the produce (the producer retries on the new leader).
    """
    writer = InMemoryIsrWriter()
    rm = open_broker(0, writer, replica_lag_time_max_ms=20)
    rm.become_leader_or_follower(
        1, {TP: leader_and_isr(0, (0, 1, 2), leader_epoch=1, partition_epoch=4)}
    )
    writer.partition_epochs[TP] = 6  # the controller moved leadership to broker 1
    partition = hosted(rm, TP)

    async def scenario() -> ProduceResult:
        produce = asyncio.create_task(
            append_records(rm, {TP: make_value_batch(2)}, -1, 5000, lambda _t: 1)
        )
        await asyncio.sleep(0.05)
        await rm.shrink_isrs()  # followers 1 and 2 lag: the controller refuses the shrink to (0,)
        assert not produce.done()
        assert partition.isr == (0, 1, 2)
        assert partition.high_watermark == 0
        rm.become_leader_or_follower(
            2, {TP: leader_and_isr(1, (0, 1, 2), isr=(1, 2), leader_epoch=2, partition_epoch=6)}
        )
        return (await asyncio.wait_for(produce, 1))[TP]

    result = asyncio.run(scenario())
    assert result.error_code == kafka_errors.NotLeaderForPartitionError.errno
    assert writer.writes == []
    assert not partition.is_leader and partition.leader_epoch == 2


def test_an_isr_write_for_a_partition_stopped_meanwhile_is_dropped(
    open_broker: OpenBroker,
) -> None:
    writer = InMemoryIsrWriter()
    rm = _lead_with_follower(open_broker, writer)
    partition = hosted(rm, TP)
    writer.on_write = lambda tp: rm.stop_replicas(1, [(tp, False)])
    partition.update_follower_fetch_state(1, 3, now_ms())
    asyncio.run(rm.maybe_expand_isr(TP, partition, 1))
    assert writer.writes == [(TP, (0, 1))]
    assert partition.isr == (0,)  # the stopped replica's state is not touched


def test_shrink_removes_lagging_followers_and_lets_the_high_watermark_advance(
    open_broker: OpenBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The broker's clock is the test's: on a loaded machine, wall time between two lines
    # may exceed replica.lag.time.max.ms and make follower 1 lag too.
    clock = [now_ms()]
    monkeypatch.setattr(replica_manager_module, "now_ms", lambda: clock[0])
    writer = InMemoryIsrWriter()
    rm = open_broker(0, writer, replica_lag_time_max_ms=30)
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0, 1, 2), leader_epoch=1)})
    partition = hosted(rm, TP)
    _append(rm, TP, 5)
    clock[0] += 50
    # Follower 1 fetches at the LEO: caught up now. Follower 2 was last caught up at
    # the LeaderAndIsr, longer ago than replica.lag.time.max.ms.
    partition.update_follower_fetch_state(1, 5, clock[0])
    assert partition.high_watermark == 0  # follower 2's LEO is unknown

    async def scenario() -> bool:
        waiter = asyncio.create_task(rm.watchers.wait([TP], 5))
        await asyncio.sleep(0.01)
        await rm.shrink_isrs()
        return await waiter

    assert asyncio.run(scenario()) is True  # the HW move woke the waiting requests
    assert writer.writes == [(TP, (0, 1))]
    assert partition.isr == (0, 1)
    assert partition.high_watermark == 5


def test_shrink_leaves_followers_that_keep_up_and_partitions_led_elsewhere(
    open_broker: OpenBroker,
) -> None:
    writer = InMemoryIsrWriter()
    rm = open_broker(0, writer, replica_lag_time_max_ms=30000)
    rm.become_leader_or_follower(
        1,
        {
            TP: leader_and_isr(0, (0, 1), leader_epoch=1),
            OTHER: leader_and_isr(1, (1, 0), leader_epoch=1),
        },
    )
    asyncio.run(rm.shrink_isrs())
    assert writer.writes == []
    assert hosted(rm, TP).isr == (0, 1)
    assert hosted(rm, OTHER).isr == (1, 0)


# ------------------------------------------------------------------- failing log dirs


def test_partitions_of_a_failed_log_dir_answer_kafka_storage_error(tmp_path: Path) -> None:
    """Kafka's ``HostedPartition.Offline``: every request on them gets KAFKA_STORAGE_ERROR."""
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    halted: list[str] = []
    manager = LogManager(dirs, LogConfig(file_delete_delay_ms=0), halt=halted.append)
    manager.startup(now_ms())
    rm = ReplicaManager(0, manager, InMemoryIsrWriter())
    try:
        (dirs[1] / "orders-1").write_text("a file where the partition dir goes")
        results = rm.become_leader_or_follower(
            1, {TP: leader_and_isr(0, (0, 1)), OTHER: leader_and_isr(0, (0, 1))}
        )
        assert results[TP].error_code == 0
        assert results[OTHER].error_code == 56  # creating its log failed: d1 is offline
        assert manager.failure_channel.offline_dirs == [dirs[1]]
        assert OTHER in rm.offline_partitions
        with pytest.raises(KafkaStorageError):
            rm.leader_partition(OTHER)
        again = rm.become_leader_or_follower(1, {OTHER: leader_and_isr(0, (0, 1), leader_epoch=2)})
        assert again[OTHER].error_code == 56
        assert rm.stop_replicas(1, [(OTHER, False)]) == {OTHER: 56}
        produced = asyncio.run(append_records(rm, {OTHER: make_value_batch(1)}, 1, 1000, _one))
        assert produced[OTHER].error_code == 56
        assert rm.handle_log_dir_failure(dirs[1]) == []
        assert rm.handle_log_dir_failure(dirs[0]) == [TP]
        assert rm.get_partition(TP) is None
        with pytest.raises(KafkaStorageError):
            rm.leader_partition(TP)
    finally:
        manager.shutdown()
    assert halted == []


def _one(_topic: str) -> int:
    return 1
