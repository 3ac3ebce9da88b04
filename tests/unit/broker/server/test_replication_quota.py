"""Replication quota rate measurement and throttled replica lists (KIP-73).

As Kafka's ReplicationQuotaManager.
"""

import pytest

from kpo_broker.server.replication_quota import (
    UNLIMITED_RATE,
    InvalidThrottledReplicasError,
    ReplicationQuotaManager,
    ReplicationQuotas,
    ThrottledReplicas,
    effective_throttle_rates,
    parse_throttled_replicas,
)


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000.0

    def __call__(self) -> float:
        return self.ms


def manager(
    quota: int = 100, num: int = 11, size_s: int = 1
) -> tuple[ReplicationQuotaManager, Clock]:
    clock = Clock()
    return ReplicationQuotaManager(quota, num, size_s, clock=clock), clock


def test_rate_with_little_history_is_divided_by_n_minus_one_windows() -> None:
    q, clock = manager()
    q.record(1000)
    # Elapsed 0 s is raised to (11 - 1) windows of 1 s.
    assert q.rate() == pytest.approx(100.0)
    clock.ms += 500
    assert q.rate() == pytest.approx(1000 / 10.5)


def test_rate_over_a_full_window_is_sum_over_elapsed_time() -> None:
    q, clock = manager(num=3)
    for _ in range(5):  # one record per second: samples at t=0,1,2 then slots are reused
        q.record(300)
        clock.ms += 1000
    # t=5 s: samples started at 2, 3, 4 s hold 300 each; oldest started 3 s ago.
    assert q.rate() == pytest.approx(900 / 3.0)


def test_obsolete_samples_are_purged_after_n_windows() -> None:
    q, clock = manager(num=3)
    q.record(3000)
    clock.ms += 2999
    assert q.rate() > 0
    clock.ms += 1
    assert q.rate() == 0.0


def test_quota_is_exceeded_only_above_the_bound() -> None:
    q, _ = manager(quota=100)
    q.record(1000)  # exactly 100 B/s over the 10 s minimum window
    assert not q.is_quota_exceeded()
    q.record(1)
    assert q.is_quota_exceeded()
    q.update_quota(1000)
    assert q.upper_bound == 1000
    assert not q.is_quota_exceeded()


def test_unlimited_quota_is_never_exceeded() -> None:
    q, _ = manager(quota=UNLIMITED_RATE)
    q.record(10**15)
    assert not q.is_quota_exceeded()


def test_negative_quota_and_bad_windows_are_rejected() -> None:
    with pytest.raises(ValueError):
        ReplicationQuotaManager(-1)
    with pytest.raises(ValueError):
        ReplicationQuotaManager(1, window_num=0)


def test_steady_throughput_under_throttle_is_close_to_the_quota() -> None:
    # A follower fetching 64 KiB whenever the quota allows, backing off 0.2 s otherwise.
    q, clock = manager(quota=256 * 1024)
    received = 0
    marks: dict[int, int] = {}
    start = clock.ms
    while clock.ms - start < 60_000:
        if q.is_quota_exceeded():
            clock.ms += 200
        else:
            q.record(65536)
            received += 65536
            clock.ms += 20
        marks[int((clock.ms - start) // 1000)] = received
    rate = (marks[59] - marks[19]) / 40
    assert 0.8 * 256 * 1024 <= rate <= 1.2 * 256 * 1024


def test_parse_throttled_replicas() -> None:
    assert parse_throttled_replicas("*") == ThrottledReplicas(all_replicas=True)
    assert parse_throttled_replicas("") == ThrottledReplicas()
    parsed = parse_throttled_replicas("0:1, 1:2,0:2")
    assert parsed.replicas == frozenset({(0, 1), (1, 2), (0, 2)})
    assert parsed.contains(0, 1)
    assert not parsed.contains(1, 1)
    for bad in ("0", "a:1", "0:1:2", "*,0:1", "-1:0"):
        with pytest.raises(InvalidThrottledReplicasError):
            parse_throttled_replicas(bad)


def test_is_throttled_follows_topic_config_changes() -> None:
    quotas = ReplicationQuotas(ReplicationQuotaManager(), ReplicationQuotaManager())
    quotas.apply_topic_config(
        "t",
        {
            "leader.replication.throttled.replicas": "0:1",
            "follower.replication.throttled.replicas": "*",
        },
    )
    assert quotas.leader.is_throttled("t", 0, 1)
    assert not quotas.leader.is_throttled("t", 0, 2)
    assert not quotas.leader.is_throttled("other", 0, 1)
    assert quotas.follower.is_throttled("t", 7, 9)
    quotas.apply_topic_config("t", {"leader.replication.throttled.replicas": "bogus"})
    assert not quotas.leader.is_throttled("t", 0, 1)
    assert not quotas.follower.is_throttled("t", 7, 9)
    quotas.apply_topic_config("u", {"leader.replication.throttled.replicas": "*"})
    quotas.apply_topic_config("u", None)
    assert not quotas.leader.is_throttled("u", 0, 0)


def test_should_throttle_needs_out_of_sync_throttled_and_exceeded() -> None:
    q, _ = manager(quota=10)
    q.mark_throttled("t", ThrottledReplicas(all_replicas=True))
    assert not q.should_throttle("t", 0, 1, in_sync=False)  # under quota
    q.record(1000)
    assert q.should_throttle("t", 0, 1, in_sync=False)
    assert not q.should_throttle("t", 0, 1, in_sync=True)
    assert not q.should_throttle("other", 0, 1, in_sync=False)


def test_effective_rates_per_broker_beats_default_beats_static() -> None:
    static = {"leader.replication.throttled.rate": 5}
    rates = effective_throttle_rates(
        static,
        {"leader.replication.throttled.rate": "7", "follower.replication.throttled.rate": "8"},
        {"leader.replication.throttled.rate": "9", "follower.replication.throttled.rate": "x"},
    )
    assert rates == {
        "leader.replication.throttled.rate": 9,
        "follower.replication.throttled.rate": 8,
    }
    assert effective_throttle_rates(static, {}, {}) == {
        "leader.replication.throttled.rate": 5,
        "follower.replication.throttled.rate": UNLIMITED_RATE,
    }
    quotas = ReplicationQuotas(ReplicationQuotaManager(), ReplicationQuotaManager())
    quotas.apply_broker_rates(rates)
    assert (quotas.leader.upper_bound, quotas.follower.upper_bound) == (9, 8)
