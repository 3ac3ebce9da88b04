"""Topic creation and metadata look-ups through kpo's Admin API client, for both systems.

The client is :class:`kpo_kafka.admin.KafkaPythonAdmin` (kafka-python's admin client).
The set-up uses only APIs both brokers implement: Metadata (leader, replicas, ISR,
controller id) and CreateTopics (with a replica assignment and topic configs).
kafka-python rather than librdkafka: librdkafka's ``list_topics`` sends a Metadata v12
request that kpo's broker rejects as malformed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TypeVar

from kpo_kafka.admin import KafkaAdmin, KafkaPythonAdmin
from kpo_kafka.admin_types import KafkaRequestError, KafkaUnavailableError, PartitionInfo

T = TypeVar("T")

#: kafka-python admin request timeout, ms (short: a killed broker must not stall polling).
ADMIN_REQUEST_TIMEOUT_MS = 5000


class BenchTimeoutError(TimeoutError):
    """A condition the benchmark waits for did not happen in time."""


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
def admin_session(
    bootstrap_servers: str, request_timeout_ms: int = ADMIN_REQUEST_TIMEOUT_MS
) -> Iterator[KafkaPythonAdmin]:
    """Yield the Admin API client for ``host:port,...`` (client id ``kpo-bench``); close it after.

    Requests time out after ``request_timeout_ms`` (default :data:`ADMIN_REQUEST_TIMEOUT_MS`);
    calls raise the ``kpo_kafka.admin_types.KafkaAdminError`` family.
    """
    admin = KafkaPythonAdmin(
        bootstrap_servers, client_id="kpo-bench", request_timeout_ms=request_timeout_ms
    )
    try:
        yield admin
    finally:
        admin.close()


def partition_info(admin: KafkaAdmin, topic: str, partition: int) -> PartitionInfo | None:
    """Return ``topic``/``partition`` as Metadata reports it, or None if unknown."""
    return admin.describe_topics([topic]).get(topic, {}).get(partition)


def wait_for_brokers(admin: KafkaAdmin, broker_ids: set[int], timeout_s: float = 90.0) -> None:
    """Wait until every broker of ``broker_ids`` is registered and a controller is elected.

    Raises:
        BenchTimeoutError: not within ``timeout_s`` s.
    """

    def ready() -> bool | None:
        cluster = admin.describe_cluster()
        ok = broker_ids <= set(cluster.brokers) and cluster.controller_id is not None
        return True if ok else None

    wait_for(ready, timeout_s, f"brokers {sorted(broker_ids)} and a controller")


def create_topic(
    admin: KafkaPythonAdmin,
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

    A CreateTopics answer that times out (REQUEST_TIMED_OUT, or none within the request
    timeout) is retried until ``timeout_s``, the topic appearing in Metadata ending the retries.

    Raises:
        kpo_kafka.admin_types.KafkaAdminError: the broker refused the topic, or no answer
            came within ``timeout_s``.
        BenchTimeoutError: the partitions did not all get a leader and full ISR in time.
    """
    # The controller may take longer than a request timeout to create the topic on a loaded
    # machine (Apache Kafka's answer waits for the new metadata): ask with a server-side
    # timeout under the client's, and treat REQUEST_TIMED_OUT or a lost answer as "under
    # way" (the creation goes on in the controller), TOPIC_ALREADY_EXISTS after such a retry
    # as done; the readiness wait below decides.
    options: dict[str, object] = {"configs": config, "timeout_ms": ADMIN_REQUEST_TIMEOUT_MS // 2}
    if assignment is not None:
        count = len(assignment)
        options["assignment"] = dict(enumerate(assignment))
    else:
        count = partitions or 1
        options["partitions"] = count
        options["replication_factor"] = replication_factor or 1
    deadline = time.monotonic() + timeout_s
    attempts = 0
    while True:
        attempts += 1
        try:
            admin.create_topic(topic, **options)  # type: ignore[arg-type]
            break
        except KafkaRequestError as exc:
            if attempts > 1 and exc.error is not None and exc.error.name == "TOPIC_ALREADY_EXISTS":
                break
            raise
        except KafkaUnavailableError:
            try:
                if partition_info(admin, topic, 0) is not None:
                    break
            except KafkaUnavailableError:
                pass
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)

    wait_for_partitions(admin, {topic: count}, fully_replicated, timeout_s)


def fully_replicated(state: PartitionInfo) -> bool:
    """Whether a partition has a leader and every replica in its ISR."""
    return state.leader >= 0 and set(state.isr) == set(state.replicas)


def wait_for_partitions(
    admin: KafkaAdmin,
    topics: Mapping[str, int],
    ready: Callable[[PartitionInfo], bool],
    timeout_s: float,
    interval_s: float = 0.1,
) -> float:
    """Wait until every partition of ``topics`` satisfies ``ready``; one Metadata request a poll.

    Args:
        admin: the Admin API client.
        topics: topic -> its partition count (partitions ``0..count-1``).
        ready: the condition on each partition's Metadata.
        timeout_s: how long to wait, s.
        interval_s: pause between polls, s.

    Returns:
        the monotonic time, s, of the poll that found every partition ready.

    Raises:
        BenchTimeoutError: not within ``timeout_s``.
    """

    def all_ready() -> float | None:
        described = admin.describe_topics(list(topics))
        for topic, count in topics.items():
            partitions = described.get(topic, {})
            for p in range(count):
                state = partitions.get(p)
                if state is None or not ready(state):
                    return None
        return time.monotonic()

    return wait_for(all_ready, timeout_s, f"partitions of {len(topics)} topic(s)", interval_s)
