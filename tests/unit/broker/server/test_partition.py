"""Partition leader/follower logic (Kafka's Partition: HW and ISR) over a real log in a temp dir."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from kpo_broker.log.config import LogConfig
from kpo_broker.log.errors import OffsetOutOfRangeError
from kpo_broker.log.log import Log
from kpo_broker.server.errors import (
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)
from kpo_broker.server.partition import IsrChange, LeaderAndIsrState, Partition
from tests.unit.broker.log.batches import make_value_batch

NOW = 1_700_000_000_000


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    opened = Log.open(tmp_path / "t-0", LogConfig(), now_ms=NOW)
    yield opened
    opened.close()


def leader_state(epoch: int = 1, isr: tuple[int, ...] = (1, 2, 3)) -> LeaderAndIsrState:
    return LeaderAndIsrState(
        controller_epoch=1,
        leader=1,
        leader_epoch=epoch,
        isr=isr,
        partition_epoch=0,
        replicas=(1, 2, 3),
    )


def test_leader_hw_is_min_leo_of_isr_after_two_fetch_rounds(log: Log) -> None:
    p = Partition("t", 0, 1, log)
    assert p.make_leader(leader_state(), NOW)
    p.append_records_to_leader(make_value_batch(5), -1, 2, NOW)
    assert p.log_end_offset == 5
    assert p.high_watermark == 0
    # Round one: followers fetch at 0 and receive the data; the HW cannot move yet.
    assert not p.update_follower_fetch_state(2, 0, NOW)
    assert not p.update_follower_fetch_state(3, 0, NOW)
    # Round two: their fetch offsets (= their LEOs) reveal they have everything.
    assert not p.update_follower_fetch_state(2, 5, NOW)
    assert p.high_watermark == 0
    assert p.update_follower_fetch_state(3, 5, NOW)
    assert p.high_watermark == 5


def test_follower_hw_is_min_of_its_leo_and_leader_hw(log: Log) -> None:
    p = Partition("t", 0, 2, log)
    p.make_follower(leader_state())
    p.append_records_as_follower(_with_offsets(make_value_batch(3), 0), leader_high_watermark=10)
    assert p.high_watermark == 3
    p.append_records_as_follower(b"", leader_high_watermark=2)
    assert p.high_watermark == 3  # never moves backwards


def _with_offsets(batch: bytes, base_offset: int) -> bytes:
    from kpo_broker.log.records import assign_offsets

    records, _ = assign_offsets(batch, base_offset, 1)
    return bytes(records)


def test_acks_all_needs_min_insync_replicas(log: Log) -> None:
    p = Partition("t", 0, 1, log)
    p.make_leader(leader_state(isr=(1,)), NOW)
    with pytest.raises(NotEnoughReplicasError):
        p.append_records_to_leader(make_value_batch(1), -1, 2, NOW)
    p.append_records_to_leader(make_value_batch(1), 1, 2, NOW)  # acks=1 is allowed
    assert p.high_watermark == 1  # ISR of one: committed at once


def test_followers_reject_produce_and_epochs_are_fenced(log: Log) -> None:
    p = Partition("t", 0, 2, log)
    p.make_follower(leader_state(epoch=4))
    with pytest.raises(NotLeaderOrFollowerError):
        p.append_records_to_leader(make_value_batch(1), 1, 1, NOW)
    with pytest.raises(FencedLeaderEpochError):
        p.check_leader_epoch(3)
    with pytest.raises(UnknownLeaderEpochError):
        p.check_leader_epoch(5)
    p.check_leader_epoch(4)
    p.check_leader_epoch(-1)


def test_lagging_follower_is_proposed_out_and_caught_up_one_back_in(log: Log) -> None:
    p = Partition("t", 0, 1, log)
    p.make_leader(leader_state(), NOW)
    p.append_records_to_leader(make_value_batch(4), 1, 1, NOW)
    p.update_follower_fetch_state(2, 4, NOW + 100)
    # Broker 3 never fetches: after replica.lag.time.max.ms it is proposed out.
    assert p.propose_isr_shrink(NOW + 5_000, 10_000) is None
    change = p.propose_isr_shrink(NOW + 10_001, 10_000)
    assert change is not None and change.isr == (1, 2)
    assert change.expected_partition_epoch == 0
    assert p.propose_isr_shrink(NOW + 10_002, 10_000) is None  # one change in flight
    p.apply_isr_change(change, 1)
    assert p.isr == (1, 2) and p.partition_epoch == 1
    assert p.high_watermark == 4  # no longer waiting for broker 3
    # Broker 3 comes back and reaches the HW: proposed back in.
    p.update_follower_fetch_state(3, 2, NOW + 11_000)
    assert p.propose_isr_expansion(3) is None
    p.update_follower_fetch_state(3, 4, NOW + 11_100)
    expand = p.propose_isr_expansion(3)
    assert expand is not None and expand.isr == (1, 2, 3)


def _leading_with_3_joining(log: Log) -> tuple[Partition, IsrChange]:
    """Leader 1 of replicas 1-3 with ISR (1, 2); broker 3 caught up at 5 and proposed in."""
    p = Partition("t", 0, 1, log)
    p.make_leader(leader_state(isr=(1, 2)), NOW)
    p.append_records_to_leader(make_value_batch(5), -1, 1, NOW)
    p.update_follower_fetch_state(2, 5, NOW)
    p.update_follower_fetch_state(3, 5, NOW)
    assert p.high_watermark == 5
    change = p.propose_isr_expansion(3)
    assert change is not None and change.isr == (1, 2, 3)
    # While the expansion is written, three more records reach the leader and broker 2.
    p.append_records_to_leader(make_value_batch(3), -1, 1, NOW)
    p.update_follower_fetch_state(2, 8, NOW)
    return p, change


def test_a_follower_being_added_to_the_isr_holds_the_hw_back(log: Log) -> None:
    """The controller may elect broker 3 once the ZooKeeper ISR has it (KIP-497 maximalIsr)."""
    p, change = _leading_with_3_joining(log)
    assert p.maximal_isr == (1, 2, 3)
    assert p.high_watermark == 5, "acknowledged records broker 3 may not have"
    assert not p.apply_isr_change(change, 1)
    assert p.isr == (1, 2, 3) and p.high_watermark == 5
    assert p.update_follower_fetch_state(3, 8, NOW)
    assert p.high_watermark == 8


def test_an_expansion_that_lost_its_race_stops_holding_the_hw(log: Log) -> None:
    p, change = _leading_with_3_joining(log)
    assert p.apply_isr_change(change, None)  # not written: the controller changed the state
    assert p.isr == (1, 2) and p.maximal_isr == (1, 2)
    assert p.high_watermark == 8


def test_an_expansion_of_unknown_outcome_holds_the_hw_until_a_write_succeeds(log: Log) -> None:
    p, change = _leading_with_3_joining(log)
    assert not p.apply_isr_change(change, None, unknown=True)  # e.g. connection loss
    assert p.isr == (1, 2) and p.pending_isr is None
    assert p.maximal_isr == (1, 2, 3) and p.high_watermark == 5
    # A later compare-and-set on the same version succeeds: the first write did not land.
    again = p.propose_isr_expansion(3)
    assert again is not None and again.expected_partition_epoch == 0
    assert not p.apply_isr_change(again, 1)
    assert p.isr == (1, 2, 3) and p.unconfirmed_isr_additions == frozenset()
    # A LeaderAndIsr from the controller also settles it.
    p.make_leader(leader_state(epoch=1, isr=(1, 2)), NOW)
    assert p.maximal_isr == (1, 2)


def test_an_isr_write_answered_after_a_leader_and_isr_changes_nothing(log: Log) -> None:
    """The controller's state (here ISR (1, 2), znode version 5) is newer than the write's."""
    p, change = _leading_with_3_joining(log)
    controller = LeaderAndIsrState(1, 1, 1, (1, 2), 5, (1, 2, 3))
    p.make_leader(controller, NOW)
    assert not p.apply_isr_change(change, 1)
    assert p.isr == (1, 2) and p.partition_epoch == 5


def test_failed_isr_write_keeps_the_old_isr(log: Log) -> None:
    p = Partition("t", 0, 1, log)
    p.make_leader(leader_state(), NOW)
    change = p.propose_isr_shrink(NOW + 60_000, 10_000)
    assert change is not None
    assert not p.apply_isr_change(change, None)
    assert p.isr == (1, 2, 3) and p.pending_isr is None


def test_new_leader_epoch_is_recorded_at_the_leo(log: Log) -> None:
    p = Partition("t", 0, 1, log)
    p.make_leader(leader_state(epoch=1, isr=(1,)), NOW)
    p.append_records_to_leader(make_value_batch(3), 1, 1, NOW)
    p.make_follower(LeaderAndIsrState(1, 2, 2, (1, 2), 1, (1, 2, 3)))
    p.make_leader(leader_state(epoch=3, isr=(1,)), NOW)
    assert log.leader_epoch_cache.end_offset_for(1, log.log_end_offset) == (1, 3)
    assert log.leader_epoch_cache.latest_epoch == 3


def test_leadership_changes_only_when_this_broker_becomes_leader(log: Log) -> None:
    """Kafka's DelayedProduce waits across leader epochs of one continuous leadership."""
    p = Partition("t", 0, 1, log)
    assert p.leadership == 0
    p.make_leader(leader_state(epoch=1), NOW)
    assert p.leadership == 1
    # The controller removes a dead follower: same leader, new epoch, same leadership.
    assert p.make_leader(leader_state(epoch=2, isr=(1, 2)), NOW)
    p.make_leader(leader_state(epoch=2, isr=(1, 2)), NOW)
    assert p.leadership == 1
    p.make_follower(LeaderAndIsrState(1, 2, 3, (1, 2), 1, (1, 2, 3)))
    assert p.leadership == 1
    p.make_leader(leader_state(epoch=4), NOW)
    assert p.leadership == 2


def test_delete_records_raises_the_start_offset_and_waits_for_live_followers(log: Log) -> None:
    p = Partition("t", 0, 1, log)
    p.make_leader(leader_state(), NOW)
    p.append_records_to_leader(make_value_batch(10), -1, 1, NOW)
    for follower in (2, 3):
        p.update_follower_fetch_state(follower, 10, NOW, log_start_offset=0)
        p.update_follower_fetch_state(follower, 10, NOW, log_start_offset=0)
    assert p.high_watermark == 10
    with pytest.raises(OffsetOutOfRangeError):
        p.delete_records_on_leader(11)
    with pytest.raises(OffsetOutOfRangeError):
        p.delete_records_on_leader(-2)
    assert p.delete_records_on_leader(4) == 4
    assert log.log_start_offset == 4
    every_broker_alive = lambda _broker: True  # noqa: E731
    assert p.low_watermark(every_broker_alive) == 0
    assert p.update_follower_fetch_state(2, 10, NOW, log_start_offset=4)  # the low watermark moves
    assert p.low_watermark(every_broker_alive) == 0
    assert p.low_watermark(lambda broker: broker != 3) == 4  # a dead follower is not awaited
    p.update_follower_fetch_state(3, 10, NOW, log_start_offset=4)
    assert p.low_watermark(every_broker_alive) == 4
    assert p.delete_records_on_leader(-1) == 10  # -1: up to the high watermark
    assert log.log_start_offset == 10
