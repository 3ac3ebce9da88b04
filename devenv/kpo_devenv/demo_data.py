"""The demo's data: create the topic, produce records with a digest per partition, read them back.

A :class:`PartitionDigest` summarises a partition's records (count, bytes, a
SHA-256 over each record's offset, key and value in offset order). The producer
side builds it from the offsets the brokers acknowledged (``acks=all``); the
read side builds it from a consumer (which fetches from the partition leader)
or by decoding a replica's log segment files on disk (Kafka's layout:
``<log.dir>/<topic>-<partition>/<base offset:020d>.log``, v2 record batches
with CRC32C; the Kafka documentation's implementation sections "Log" and "Record
Batch"). Equal digests mean the same records at the same offsets. Records go through
kafka-python's producer and consumer; Admin API calls through
:class:`kpo_kafka.admin.KafkaPythonAdmin` (client id :data:`CLIENT_ID`). Nothing here runs a
server.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.record import MemoryRecords

from kpo_devenv.waiting import wait_until
from kpo_kafka.admin import KafkaAdmin
from kpo_kafka.client_config import ClientSecurity

#: Size of each produced record's value, bytes (random, so incompressible).
RECORD_BYTES = 8192
#: The ``client.id`` the demo's clients (producer, consumer, admin) present to the brokers.
CLIENT_ID = "kpo-demo"


class DemoDataError(RuntimeError):
    """Producing, reading or describing the demo's data failed; the message says what."""


@dataclass(frozen=True)
class PartitionDigest:
    """What a partition holds, as far as the demo checks it.

    Attributes:
        records: Number of records.
        value_bytes: Sum of the record values' sizes, bytes.
        sha256: Hex SHA-256 over (offset, BLAKE2b of key and value) of every record,
            in offset order.
    """

    records: int
    value_bytes: int
    sha256: str

    @property
    def short(self) -> str:
        """The first 12 hex digits of :attr:`sha256`, for tables."""
        return self.sha256[:12]


class DigestBuilder:
    """Accumulates records (in any order) into a :class:`PartitionDigest`."""

    def __init__(self) -> None:
        self._hashes: dict[int, bytes] = {}
        self._value_bytes = 0

    def add(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        """Add the record at ``offset``; a second record at the same offset replaces the first."""
        item = hashlib.blake2b(digest_size=16)
        for part in (key, value):
            data = part or b""
            item.update(len(data).to_bytes(8, "big") + data)
        if offset not in self._hashes:
            self._value_bytes += len(value or b"")
        self._hashes[offset] = item.digest()

    def digest(self) -> PartitionDigest:
        """Return the digest of the records added so far."""
        total = hashlib.sha256()
        for offset in sorted(self._hashes):
            total.update(offset.to_bytes(8, "big", signed=True) + self._hashes[offset])
        return PartitionDigest(len(self._hashes), self._value_bytes, total.hexdigest())


def wait_brokers(admin: KafkaAdmin, broker_ids: Sequence[int], timeout_s: float = 60.0) -> int:
    """Wait until every broker in ``broker_ids`` is registered and a controller is elected.

    Returns:
        The controller's broker id (DescribeCluster).

    Raises:
        DemoDataError: not so within ``timeout_s`` seconds.
    """
    last: object = None

    def controller() -> int | None:
        nonlocal last
        try:
            info = admin.describe_cluster()
            ids = set(info.brokers)
            if ids == set(broker_ids) and info.controller_id is not None:
                return info.controller_id
            last = f"brokers {sorted(ids)}, controller {info.controller_id}"
        except Exception as exc:  # not serving yet
            last = exc
        return None

    return wait_until(
        controller,
        timeout_s,
        lambda: DemoDataError(
            f"brokers {list(broker_ids)} not all up after {timeout_s:.0f} s: {last}"
        ),
        interval_s=0.3,
    )


def produce(
    bootstrap_servers: str,
    topic: str,
    partitions: Sequence[int],
    total_bytes: int,
    record_bytes: int = RECORD_BYTES,
    on_progress: Callable[[int], None] | None = None,
    security: ClientSecurity | None = None,
) -> dict[int, PartitionDigest]:
    """Produce about ``total_bytes`` of random values round-robin over ``partitions``.

    Uses kafka-python's ``KafkaProducer`` with ``acks=all`` (and its default
    idempotence, KIP-98), so every acknowledged record is in every in-sync replica.

    Args:
        bootstrap_servers: ``host:port[,...]``.
        topic: An existing topic.
        partitions: The partitions to write, each receiving the same number of records.
        total_bytes: Value bytes to write in all (rounded up to whole records).
        record_bytes: Size of each value, bytes.
        on_progress: Called with the acknowledged value bytes so far, from the caller's thread.
        security: How to connect (TLS, SASL); None: PLAINTEXT.

    Returns:
        partition -> digest of the acknowledged records.

    Raises:
        DemoDataError: a record was not acknowledged.
    """
    builders = {p: DigestBuilder() for p in partitions}
    lock = threading.Lock()
    acked = [0]
    errors: list[BaseException] = []

    def on_ack(partition: int, key: bytes, value: bytes) -> Callable[[Any], None]:
        def callback(metadata: Any) -> None:
            with lock:
                builders[partition].add(metadata.offset, key, value)
                acked[0] += len(value)

        return callback

    producer = KafkaProducer(
        bootstrap_servers=bootstrap_servers,
        client_id=CLIENT_ID,
        acks="all",
        linger_ms=10,
        batch_size=256 * 1024,
        max_request_size=4 * 1024 * 1024,
        **(security or ClientSecurity()).kafka_python_kwargs(),
    )
    try:
        count = -(-total_bytes // record_bytes)
        for seq in range(count):
            partition = partitions[seq % len(partitions)]
            key = f"{partition}-{seq}".encode()
            value = os.urandom(record_bytes)
            future = producer.send(topic, key=key, value=value, partition=partition)
            future.add_callback(on_ack(partition, key, value))
            future.add_errback(errors.append)
            if on_progress is not None and seq % 64 == 0:
                on_progress(acked[0])
        producer.flush()
    finally:
        producer.close()
    if errors:
        raise DemoDataError(f"{len(errors)} records not acknowledged, first: {errors[0]!r}")
    if on_progress is not None:
        on_progress(acked[0])
    return {p: b.digest() for p, b in builders.items()}


def read_via_consumer(
    bootstrap_servers: str,
    topic: str,
    partitions: Sequence[int],
    timeout_s: float = 120.0,
    security: ClientSecurity | None = None,
) -> dict[int, PartitionDigest]:
    """Read every record of ``partitions`` up to the high watermark with ``KafkaConsumer``.

    The consumer fetches from each partition's leader (no KIP-392 follower fetching);
    ``security`` says how it connects (None: PLAINTEXT).

    Raises:
        DemoDataError: the end was not reached within ``timeout_s`` seconds.
    """
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        client_id=CLIENT_ID,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **(security or ClientSecurity()).kafka_python_kwargs(),
    )
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        builders = {p: DigestBuilder() for p in partitions}
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise DemoDataError(f"reading {topic} did not reach {ends} in {timeout_s:.0f} s")
            for tp, records in consumer.poll(timeout_ms=500).items():
                for record in records:
                    builders[tp.partition].add(record.offset, record.key, record.value)
    finally:
        consumer.close()
    return {p: b.digest() for p, b in builders.items()}


def read_log_dir(log_dirs: Sequence[Path], topic: str, partition: int) -> PartitionDigest:
    """Decode one replica's segment files on disk (``<log dir>/<topic>-<partition>/*.log``).

    Every v2 record batch's CRC32C is checked. Read this only while nothing is
    being produced, so no batch is half-written.

    Raises:
        DemoDataError: no log dir holds the replica, or a batch fails its CRC.
    """
    folders = [
        d / f"{topic}-{partition}" for d in log_dirs if (d / f"{topic}-{partition}").is_dir()
    ]
    if not folders:
        raise DemoDataError(f"no replica of {topic}-{partition} in {', '.join(map(str, log_dirs))}")
    builder = DigestBuilder()
    for segment in sorted(folders[0].glob("*.log")):
        records = MemoryRecords(segment.read_bytes())
        while (batch := records.next_batch()) is not None:
            if not batch.validate_crc():
                raise DemoDataError(f"CRC mismatch in {segment} at offset {batch.base_offset}")
            for record in batch:
                builder.add(record.offset, record.key, record.value)
    return builder.digest()
