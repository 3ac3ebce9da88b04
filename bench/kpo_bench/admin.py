"""Topic creation and metadata look-ups through kafka-python's admin client, for both systems.

Only APIs both brokers implement are used: Metadata (leader, replicas, ISR,
controller id) and CreateTopics (with a replica assignment and topic configs).
kafka-python rather than librdkafka: librdkafka's ``list_topics`` sends a Metadata v12
request that kpo's broker rejects as malformed (see ``bench/README.md``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from kafka.admin import KafkaAdminClient, NewTopic

T = TypeVar("T")

#: kafka-python admin request timeout, ms (short: a killed broker must not stall polling).
ADMIN_REQUEST_TIMEOUT_MS = 5000


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


@contextmanager
def admin_session(bootstrap_servers: str) -> Iterator[Any]:
    """Yield a kafka-python admin client for ``host:port,...``; close it afterwards.

    Raises:
        kafka.errors.NoBrokersAvailable: no bootstrap server answered.
    """
    admin = KafkaAdminClient(
        bootstrap_servers=bootstrap_servers.split(","),
        request_timeout_ms=ADMIN_REQUEST_TIMEOUT_MS,
        client_id="kpo-bench",
    )
    try:
        yield admin
    finally:
        admin.close()


def live_broker_ids(admin: Any) -> set[int]:
    """Return the broker ids the Metadata API lists (the registered, live brokers)."""
    return {int(b["broker_id"]) for b in admin.describe_cluster()["brokers"]}


def controller_id(admin: Any) -> int:
    """Return the controller's broker id from Metadata (-1 while there is none)."""
    value = admin.describe_cluster().get("controller_id")
    return -1 if value is None else int(value)


def partition_state(admin: Any, topic: str, partition: int) -> PartitionState | None:
    """Return ``topic``/``partition`` as Metadata reports it, or None if unknown."""
    for described in admin.describe_topics([topic]):
        name = described.get("name", described.get("topic"))
        if name != topic or described.get("error_code", 0) != 0:
            continue
        for part in described["partitions"]:
            if part["partition_index"] == partition:
                return PartitionState(
                    int(part["leader_id"]), tuple(part["replica_nodes"]), tuple(part["isr_nodes"])
                )
    return None


def wait_for_brokers(admin: Any, broker_ids: set[int], timeout_s: float = 90.0) -> None:
    """Wait until every broker of ``broker_ids`` is registered and a controller is elected.

    Raises:
        BenchTimeoutError: not within ``timeout_s`` s.
    """

    def ready() -> bool | None:
        ok = broker_ids <= live_broker_ids(admin) and controller_id(admin) >= 0
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
        kafka.errors.KafkaError: the broker refused the topic.
        BenchTimeoutError: the partitions did not all get a leader and full ISR in time.
    """
    if assignment is not None:
        count = len(assignment)
        replicas = {p: list(r) for p, r in enumerate(assignment)}
        new = NewTopic(topic, -1, -1, replica_assignments=replicas, topic_configs=config or {})
    else:
        count = partitions or 1
        new = NewTopic(topic, count, replication_factor or 1, topic_configs=config or {})
    admin.create_topics([new], timeout_ms=int(timeout_s * 1000))

    def all_ready() -> bool | None:
        for p in range(count):
            state = partition_state(admin, topic, p)
            if state is None or state.leader < 0 or set(state.isr) != set(state.replicas):
                return None
        return True

    wait_for(all_ready, timeout_s, f"leaders and full ISR of {topic}")
