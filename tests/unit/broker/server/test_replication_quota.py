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


def test_rate_with_little_history_is_divided_by_one_window() -> None:
    # SimpleRate.windowSize: max(elapsed since the oldest sample, one window).
    q, clock = manager()
    q.record(1000)
    assert q.rate() == pytest.approx(1000.0)
    clock.ms += 500
    assert q.rate() == pytest.approx(1000.0)
    clock.ms += 1500
    assert q.rate() == pytest.approx(1000 / 2.0)


def test_rate_over_a_full_window_is_sum_over_elapsed_time() -> None:
    q, clock = manager(num=3)
    for _ in range(5):  # one record per second: samples at t=0..4 s in N + 1 = 4 slots
        q.record(300)
        clock.ms += 1000
    # t=5 s: the samples last recorded at 1 and 2 s are 3 s old (obsolete); those started
    # at 3 and 4 s hold 300 each, and the oldest of them started 2 s ago.
    assert q.rate() == pytest.approx(600 / 2.0)


def test_obsolete_samples_are_purged_n_windows_after_their_last_record() -> None:
    q, clock = manager(num=3)
    q.record(3000)
    clock.ms += 2999
    assert q.rate() > 0
    clock.ms += 1
    assert q.rate() == 0.0


def test_a_sample_overlapping_the_window_still_counts() -> None:
    # Kafka 3.8+ (the rate spike fix): a sample that started more than N*W ago but was
    # recorded into later is kept until N*W after its last record.
    q, clock = manager(num=2)
    start = clock.ms
    q.record(0)
    clock.ms = start + 990
    q.record(1000)
    clock.ms = start + 2100
    # Purged by its start, the 1000 bytes would be forgotten already.
    assert q.rate() == pytest.approx(1000 / 2.1)
    clock.ms = start + 2990
    assert q.rate() == 0.0


def test_n_plus_one_samples_are_kept() -> None:
    q, clock = manager(num=2)
    start = clock.ms
    # 0 and 900 ms go to the sample started at 0; 1000 and 2000 ms open two more: with
    # N + 1 = 3 slots the first is not reused, and its last record (900 ms) is recent.
    for at in (0, 900, 1000, 2000):
        clock.ms = start + at
        q.record(100)
    clock.ms = start + 2500
    assert q.rate() == pytest.approx(400 / 2.5)


def test_quota_is_exceeded_only_above_the_bound() -> None:
    q, _ = manager(quota=100)
    q.record(100)  # exactly 100 B/s over the one-window minimum
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


def _two_fetchers_share_one_quota(num: int, round_trip_ms: float) -> float:
    """Seconds two fetchers take to copy 20 MiB each through one follower quota of 1 MiB/s.

    Each fetcher, as Kafka's ReplicaFetcherThread: check the shared quota before a fetch
    (exceeded: back off ``replica.fetch.backoff.ms`` = 1 s), fetch up to 1 MiB
    (``replica.fetch.max.bytes``) taking ``round_trip_ms``, record the bytes after it.
    The fetchers interleave, so both may pass the check before either records.
    """
    mib = 1 << 20
    q, clock = manager(quota=mib, num=num)
    start = clock.ms
    left = [20 * mib, 20 * mib]
    ready = [start, start + 1.0]  # when each fetcher next acts (ms)
    in_flight: list[float | None] = [None, None]  # when its fetch returns
    while any(left):
        i = min((j for j in (0, 1) if left[j]), key=lambda j: in_flight[j] or ready[j])
        if in_flight[i] is not None:
            clock.ms = in_flight[i]
            n = min(mib, left[i])
            q.record(n)
            left[i] -= n
            in_flight[i], ready[i] = None, clock.ms
            continue
        clock.ms = ready[i]
        if q.is_quota_exceeded():
            ready[i] += 1000.0
        else:
            in_flight[i] = clock.ms + round_trip_ms
    return (clock.ms - start) / 1000


@pytest.mark.parametrize("num", [2, 11])
@pytest.mark.parametrize("round_trip_ms", [5.0, 40.0])
def test_two_fetchers_sharing_the_follower_quota_stay_within_it(
    num: int, round_trip_ms: float
) -> None:
    # 40 MiB at 1 MiB/s is 40 s; the first window's burst and the check-then-record race
    # between the fetchers may shorten it a little, never by more than 5 %.
    took = _two_fetchers_share_one_quota(num, round_trip_ms)
    assert 0.95 * 40 <= took <= 1.05 * 40, took
