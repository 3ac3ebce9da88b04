"""An acked-write checker: an idempotent acks=all producer whose acknowledgements are kept.

Every record is ``<partition>-<sequence>``; the delivery reports (librdkafka through
confluent-kafka, ``enable.idempotence=true``) record, per partition, the values that were
acknowledged and when. :func:`check_acked_writes` then reads the partitions back and
compares: every acknowledged record present exactly once, in order, and no record that
was never sent.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from kpo_devenv.kafka_cluster import KafkaCluster


@dataclass
class AckedWrites:
    """What the producer thread saw.

    Attributes:
        acked: partition -> acknowledged values, in acknowledgement order.
        ack_times: partition -> monotonic time of each acknowledgement.
        errors: delivery errors (none expected: the producer retries until it is acked).
        sent: every value handed to the producer.
    """

    acked: dict[int, list[bytes]] = field(default_factory=dict)
    ack_times: dict[int, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    sent: set[bytes] = field(default_factory=set)

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
            }
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
