"""Topic creation and metadata look-ups through librdkafka (confluent-kafka), for both systems.

Only APIs both brokers implement are used: Metadata (leader, replicas, ISR,
controller id) and CreateTopics (with a replica assignment and topic configs).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka.admin import AdminClient, NewTopic

T = TypeVar("T")

#: librdkafka's log level for the bench's clients: errors only (killed brokers are expected).
CLIENT_LOG_LEVEL = 3


class BenchTimeoutError(TimeoutError):
    """A condition the benchmark waits for did not happen in time."""


@dataclass(frozen=True)
class PartitionState:
    """A partition as the Metadata API reports it.

    Attributes:
        leader: leader broker id, -1 when it has none.
        replicas: the assigned replicas (AR), in preference order.
        isr: the in-sync replicas.
    """

    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def wait_for(
    probe: Callable[[], T | None], timeout_s: float, what: str, interval_s: float = 0.1
) -> T:
    """Call ``probe`` until it returns something other than None, and return that.

    Exceptions raised by ``probe`` count as "not yet".

    Args:
        probe: the condition.
        timeout_s: how long to wait, s.
        what: description for the error.
        interval_s: pause between calls, s.

    Raises:
        BenchTimeoutError: still None after ``timeout_s`` (with the last exception, if any).
    """
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while True:
        try:
            value = probe()
            if value is not None:
                return value
        except Exception as exc:  # a failing probe means "not yet"
            last_error = exc
        if time.monotonic() > deadline:
            suffix = f" (last error: {last_error})" if last_error else ""
            raise BenchTimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}{suffix}")
        time.sleep(interval_s)


def admin_client(bootstrap_servers: str) -> Any:
    """Return a librdkafka admin client for ``bootstrap_servers`` (``host:port,...``)."""
    return AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": CLIENT_LOG_LEVEL})


def live_broker_ids(admin: Any, timeout_s: float = 5.0) -> set[int]:
    """Return the broker ids the Metadata API lists (the registered, live brokers)."""
    return set(admin.list_topics(timeout=timeout_s).brokers)


def controller_id(admin: Any, timeout_s: float = 5.0) -> int:
    """Return the controller's broker id from Metadata (-1 while there is none)."""
    return int(admin.list_topics(timeout=timeout_s).controller_id)


def partition_state(
    admin: Any, topic: str, partition: int, timeout_s: float = 5.0
) -> PartitionState | None:
    """Return ``topic``/``partition`` as Metadata reports it, or None if unknown."""
    metadata = admin.list_topics(topic=topic, timeout=timeout_s)
    described = metadata.topics.get(topic)
    if described is None or described.error is not None:
        return None
    part = described.partitions.get(partition)
    if part is None:
        return None
    return PartitionState(int(part.leader), tuple(part.replicas), tuple(part.isrs))


def wait_for_brokers(admin: Any, broker_ids: set[int], timeout_s: float = 90.0) -> None:
    """Wait until every broker of ``broker_ids`` is registered and a controller is elected.

    Raises:
        BenchTimeoutError: not within ``timeout_s`` s.
    """

    def ready() -> bool | None:
        metadata = admin.list_topics(timeout=5)
        ok = broker_ids <= set(metadata.brokers) and metadata.controller_id >= 0
        return True if ok else None

    wait_for(ready, timeout_s, f"brokers {sorted(broker_ids)} and a controller")


def create_topic(
    admin: Any,
    topic: str,
    *,
    partitions: int | None = None,
    replication_factor: int | None = None,
    assignment: Sequence[Sequence[int]] | None = None,
    config: Mapping[str, str] | None = None,
    timeout_s: float = 60.0,
) -> None:
    """Create ``topic`` and wait until each partition has a leader and a full ISR.

    Give either ``partitions`` and ``replication_factor`` or a replica ``assignment``
    (one replica list per partition, preferred leader first).

    Raises:
        confluent_kafka.KafkaException: the broker refused the topic.
        BenchTimeoutError: the partitions did not all get a leader and full ISR in time.
    """
    if assignment is not None:
        # librdkafka wants the partition count with an assignment, and no replication factor.
        count = len(assignment)
        new = NewTopic(
            topic, count, -1, replica_assignment=[list(r) for r in assignment], config=config or {}
        )
    else:
        new = NewTopic(topic, partitions or 1, replication_factor or 1, config=config or {})
        count = partitions or 1
    for future in admin.create_topics([new], request_timeout=timeout_s).values():
        future.result()

    def all_ready() -> bool | None:
        for p in range(count):
            state = partition_state(admin, topic, p)
            if state is None or state.leader < 0 or set(state.isr) != set(state.replicas):
                return None
        return True

    wait_for(all_ready, timeout_s, f"leaders and full ISR of {topic}")
