"""KafkaAdminPool: each Admin API call on its own client, never one client in two threads."""

from __future__ import annotations

import threading
from collections.abc import Collection

import pytest

from kpo_kafka.admin_types import ClusterInfo, PartitionInfo
from kpo_operator.admin_pool import KafkaAdminPool
from tests.unit.operator.fake_kafka import FakeKafkaAdmin

WAIT_S = 10.0


class GuardedKafka(FakeKafkaAdmin):
    """Fails if two threads use it at once; ``describe_topics(["slow"])`` blocks until released."""

    def __init__(self, release: threading.Event, blocked: threading.Event) -> None:
        super().__init__(brokers={0: None})
        self.release = release
        self.blocked = blocked
        self.busy = threading.Lock()

    def describe_cluster(self) -> ClusterInfo:
        assert self.busy.acquire(blocking=False), "client used by two threads at once"
        try:
            return super().describe_cluster()
        finally:
            self.busy.release()

    def describe_topics(
        self, topics: Collection[str] | None = None
    ) -> dict[str, dict[int, PartitionInfo]]:
        assert self.busy.acquire(blocking=False), "client used by two threads at once"
        try:
            if topics is not None and "slow" in topics:
                self.blocked.set()
                assert self.release.wait(WAIT_S)
            return super().describe_topics(topics)
        finally:
            self.busy.release()


def _pool(size: int) -> tuple[KafkaAdminPool, list[GuardedKafka], threading.Event, threading.Event]:
    release, blocked = threading.Event(), threading.Event()
    made: list[GuardedKafka] = []

    def connect() -> GuardedKafka:
        made.append(GuardedKafka(release, blocked))
        return made[-1]

    return KafkaAdminPool(connect, size), made, release, blocked


def test_a_slow_call_does_not_hold_up_another_call() -> None:
    pool, made, release, blocked = _pool(2)
    slow = threading.Thread(target=lambda: pool.describe_topics(["slow"]), daemon=True)
    slow.start()
    assert blocked.wait(WAIT_S)
    assert pool.describe_cluster().brokers == {0: None}
    assert len(made) == 2
    release.set()
    slow.join(WAIT_S)
    assert not slow.is_alive()


def test_clients_are_reused_and_never_more_than_size() -> None:
    pool, made, release, _ = _pool(3)
    release.set()
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(50):
                pool.describe_cluster()
                pool.describe_topics(None)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert errors == []
    assert 1 <= pool.opened == len(made) <= 3
    pool.close()
    assert all(client.closed for client in made)


def test_a_pool_needs_a_client() -> None:
    with pytest.raises(ValueError, match="size"):
        KafkaAdminPool(lambda: FakeKafkaAdmin(brokers={0: None}), 0)
