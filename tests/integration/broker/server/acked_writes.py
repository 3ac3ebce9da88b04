"""An acked-write checker: an idempotent acks=all producer whose acknowledgements are kept.

Every record is ``<partition>-<sequence>``; the delivery reports (librdkafka through
confluent-kafka, ``enable.idempotence=true``) record, per partition, the values that were
acknowledged and when. :func:`check_acked_writes` then reads the partitions back and
compares: every acknowledged record present exactly once, in order, and no record that
was never sent.

The producer also keeps librdkafka's idempotence events (``debug=eos``: partition drains,
producer epoch bumps and their reasons, sequence errors), and :func:`locate_records` finds
the batches holding given records in a broker's segment files, with their producer id,
epoch and sequence. Both tell a record the broker failed to deduplicate (two copies in
one producer epoch, KIP-98) from one the client sent again under a new epoch: librdkafka
bumps the epoch of its idempotent producer after OUT_OF_ORDER_SEQUENCE_NUMBER on a request
behind a failed one and renumbers every unacknowledged message, possibly persisted ones
included (confluentinc/librdkafka#4953, ``rd_kafka_handle_idempotent_Produce_error``).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from kafka.record.default_records import DefaultRecordBatch

from kpo_broker.log.errors import CorruptRecordError
from kpo_broker.log.records import BatchHeader, iter_batches
from kpo_devenv.kafka_cluster import KafkaCluster

#: librdkafka's debug line when its idempotent producer bumps its own epoch.
EPOCH_BUMP_MARK = "bumped epoch"


@dataclass
class AckedWrites:
    """What the producer thread saw.

    Attributes:
        acked: partition -> acknowledged values, in acknowledgement order.
        ack_times: partition -> monotonic time of each acknowledgement.
        errors: delivery errors (none expected: the producer retries until it is acked).
        sent: every value handed to the producer.
        client_events: (monotonic time, line) of librdkafka's idempotence debug events.
    """

    acked: dict[int, list[bytes]] = field(default_factory=dict)
    ack_times: dict[int, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    sent: set[bytes] = field(default_factory=set)
    client_events: list[tuple[float, str]] = field(default_factory=list)

    @property
    def total(self) -> int:
        """Number of acknowledged records."""
        return sum(len(v) for v in self.acked.values())

    def first_ack_after(self, partition: int, moment: float) -> float | None:
        """Monotonic time of the first acknowledgement on ``partition`` after ``moment``."""
        return next((t for t in self.ack_times.get(partition, []) if t > moment), None)

    def longest_ack_gap(self, partition: int, since: float) -> float:
        """Longest time without an acknowledgement on ``partition`` after ``since``, s.

        Measured between consecutive acknowledgements (and from ``since`` to the first):
        how long writes to the partition were unavailable around a fault at ``since``.
        """
        return self.longest_ack_gap_at(partition, since)[0]

    def events_between(self, start: float, end: float, mark: str = "") -> list[str]:
        """librdkafka idempotence events logged in ``[start, end]`` containing ``mark``.

        Each line is prefixed with its time relative to ``start``, s.
        """
        return [
            f"+{t - start:.1f} s {line}"
            for t, line in list(self.client_events)
            if start <= t <= end and mark in line
        ]

    def epoch_bumps(self) -> int:
        """Number of producer epoch bumps librdkafka made."""
        return sum(EPOCH_BUMP_MARK in line for _, line in list(self.client_events))

    def longest_ack_gap_at(self, partition: int, since: float) -> tuple[float, float]:
        """(longest gap, its start relative to ``since``) on ``partition``, s."""
        times = [since, *(t for t in self.ack_times.get(partition, []) if t > since)]
        return max(((b - a, a - since) for a, b in itertools.pairwise(times)), default=(0.0, 0.0))


class AckedWriteProducer:
    """Produces to every partition of a topic in a thread until stopped.

    Args:
        cluster: the brokers.
        topic: the topic.
        partitions: its partition count.
        pause_s: pause between two records.
    """

    def __init__(
        self, cluster: KafkaCluster, topic: str, partitions: int, pause_s: float = 0.002
    ) -> None:
        self.topic = topic
        self.partitions = partitions
        self.pause_s = pause_s
        self.writes = AckedWrites(
            acked={p: [] for p in range(partitions)}, ack_times={p: [] for p in range(partitions)}
        )
        self._bootstrap = ",".join(b.bootstrap for b in cluster.brokers.values())
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="acked-writes", daemon=True)
        self._client_log = logging.getLogger(f"acked-writes.librdkafka.{id(self)}")
        self._client_log.propagate = False
        self._client_log.setLevel(logging.DEBUG)
        self._client_log.addHandler(_EventHandler(self.writes.client_events))

    def start(self) -> AckedWriteProducer:
        """Start producing."""
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 180) -> AckedWrites:
        """Stop producing, wait until every record in flight is acknowledged or failed."""
        self._stop.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise AssertionError("the producer did not finish its records in time")
        return self.writes

    def acked_count(self) -> int:
        """Records acknowledged so far."""
        with self._lock:
            return self.writes.total

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        now = time.monotonic()
        with self._lock:
            if err is not None:
                self.writes.errors.append(f"{msg.value()!r}: {err}")
                return
            partition = msg.partition()
            self.writes.acked[partition].append(msg.value())
            self.writes.ack_times[partition].append(now)

    def _run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self._bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                "message.timeout.ms": 300000,
                "request.timeout.ms": 15000,
                "topic.metadata.refresh.interval.ms": 1000,
                "retry.backoff.ms": 100,
                "debug": "eos",
            },
            logger=self._client_log,
        )
        i = 0
        try:
            while not self._stop.is_set():
                partition = i % self.partitions
                value = f"{partition}-{i}".encode()
                self.writes.sent.add(value)
                while True:
                    try:
                        producer.produce(
                            self.topic, value, partition=partition, on_delivery=self._on_delivery
                        )
                        break
                    except BufferError:
                        producer.poll(0.1)
                producer.poll(0)
                i += 1
                time.sleep(self.pause_s)
        finally:
            producer.flush(240)


class _EventHandler(logging.Handler):
    """Keeps librdkafka's log lines (delivered by ``poll``) with their monotonic time."""

    def __init__(self, events: list[tuple[float, str]]) -> None:
        super().__init__(logging.DEBUG)
        self._events = events

    def emit(self, record: logging.LogRecord) -> None:
        self._events.append((time.monotonic(), record.getMessage()))


@dataclass(frozen=True)
class LocatedRecord:
    """Where a record sits in a replica's log, with its batch's producer fields.

    Attributes:
        value: the record's value.
        offset: its offset.
        partition_leader_epoch: the leader epoch its batch was appended in.
        producer_id: its batch's producer id.
        producer_epoch: its batch's producer epoch.
        base_sequence: its batch's base sequence.
    """

    value: bytes
    offset: int
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int


def locate_records(
    log_dirs: Iterable[Path], topic: str, partition: int, values: set[bytes]
) -> list[LocatedRecord]:
    """Find every copy of ``values`` in the segment files of ``topic``-``partition``.

    Reads the ``.log`` files of the partition directory under ``log_dirs`` (one broker's)
    as they are; a torn tail is ignored.

    Returns:
        The copies found, in offset order.
    """
    found: list[LocatedRecord] = []
    for log_dir in log_dirs:
        for segment in sorted((log_dir / f"{topic}-{partition}").glob("*.log")):
            for header, batch in _complete_batches(segment.read_bytes()):
                for record in DefaultRecordBatch(bytes(batch)):
                    if record.value in values:
                        found.append(
                            LocatedRecord(
                                record.value,
                                record.offset,
                                header.partition_leader_epoch,
                                header.producer_id,
                                header.producer_epoch,
                                header.base_sequence,
                            )
                        )
    return sorted(found, key=lambda r: r.offset)


def _complete_batches(data: bytes) -> list[tuple[BatchHeader, memoryview]]:
    """The batches of a segment file up to its end or a torn tail (a live log may grow)."""
    out: list[tuple[BatchHeader, memoryview]] = []
    try:
        for item in iter_batches(data, verify_crc=False):
            out.append(item)
    except CorruptRecordError:
        pass
    return out


def read_partitions(
    cluster: KafkaCluster, topic: str, partitions: int, expected: int, timeout_s: float = 90
) -> dict[int, list[bytes]]:
    """Read every partition from offset 0 until ``expected`` records (at least) arrived."""
    consumer = Consumer(
        {
            "bootstrap.servers": ",".join(
                b.bootstrap for b in cluster.brokers.values() if b.is_running()
            ),
            "group.id": f"checker-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_uncommitted",
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + timeout_s
    idle_after_expected = 0
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                if sum(len(v) for v in got.values()) >= expected:
                    idle_after_expected += 1
                    if idle_after_expected >= 4:  # nothing more for 2 s: all read
                        break
                continue
            if msg.error() is not None:
                continue
            got[msg.partition()].append(msg.value())
    finally:
        consumer.close()
    return got


def check_acked_writes(writes: AckedWrites, got: dict[int, list[bytes]]) -> None:
    """Assert every acked record is present exactly once and in order, and nothing unsent.

    Raises:
        AssertionError: naming the partition and what is lost, duplicated or out of order.
    """
    assert writes.errors == [], writes.errors[:5]
    for partition, acked in writes.acked.items():
        present = got.get(partition, [])
        unknown = [v for v in present if v not in writes.sent]
        assert unknown == [], f"partition {partition}: records never sent: {unknown[:5]}"
        duplicated = len(present) - len(set(present))
        assert duplicated == 0, f"partition {partition}: {duplicated} duplicated records"
        lost = set(acked) - set(present)
        assert not lost, f"partition {partition}: {len(lost)} acked records lost"
        acked_set = set(acked)
        in_log = [v for v in present if v in acked_set]
        assert in_log == acked, f"partition {partition}: acked records out of order"
