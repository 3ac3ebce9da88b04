"""The demo's consumer group: members reading the topic while its partitions move.

:class:`DemoGroup` runs ``members`` kafka-python ``KafkaConsumer`` threads in one group
(``subscribe()``, Kafka's classic group protocol: the brokers' group coordinator assigns
nothing itself, the members' range assignor does), each committing synchronously after every
batch it read and pacing itself so the group reads at ``rate`` bytes/s (the demo sets it so
that reading lasts about as long as the move). A sampler thread measures the group's lag
as ``kafka-consumer-groups --describe`` does: per partition, log end offset minus committed
offset (OffsetFetch and ListOffsets). :func:`check_group` compares, after the move, the
group's committed offsets and what its members read with what the producer got acknowledged.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import OffsetSpec
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from rich.table import Table

from kpo_devenv.demo_data import CLIENT_ID, DemoDataError, DigestBuilder, PartitionDigest
from kpo_devenv.demo_verify import check_table, mark
from kpo_devenv.waiting import wait_until
from kpo_kafka.client_config import ClientSecurity

#: The demo group's ``group.id``.
GROUP_ID = "orders-readers"
#: Records per poll of each member (each record is 8 KiB in the demo).
MAX_POLL_RECORDS = 16


@dataclass(frozen=True)
class LagSample:
    """The group's position at one moment.

    Attributes:
        at: ``time.monotonic()`` of the sample.
        committed: partition -> committed offset (absent: nothing committed yet).
        ends: partition -> log end offset.
    """

    at: float
    committed: dict[int, int]
    ends: dict[int, int]

    @property
    def lag(self) -> dict[int, int]:
        """Partition -> records between the committed offset and the log end (Kafka's LAG)."""
        return {p: end - self.committed.get(p, 0) for p, end in self.ends.items()}

    @property
    def total(self) -> int:
        """The group's lag over all partitions, records."""
        return sum(self.lag.values())


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    """Counts the assignments a member receives and keeps its current partitions."""

    def __init__(self, group: DemoGroup, name: str) -> None:
        self._group = group
        self._name = name

    def on_partitions_revoked(self, revoked: Any) -> None:
        self._group._owned[self._name] = []

    def on_partitions_assigned(self, assigned: Any) -> None:
        self._group._owned[self._name] = sorted(tp.partition for tp in assigned)
        with self._group._lock:
            self._group.assignments += 1


class DemoGroup:
    """A paced consumer group of kafka-python threads, and a lag sampler.

    Args:
        bootstrap_servers: ``host:port[,...]``.
        topic: The topic the members subscribe to.
        partitions: The topic's partitions (for lag and the final check).
        members: Number of member threads.
        rate: The group's reading pace, value bytes/s (split evenly among the members).
        group_id: The ``group.id``.
        security: How the members and the sampler connect (TLS, SASL); None: PLAINTEXT.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        partitions: Sequence[int],
        members: int,
        rate: float,
        group_id: str = GROUP_ID,
        security: ClientSecurity | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.security = security or ClientSecurity()
        self.topic = topic
        self.partitions = list(partitions)
        self.group_id = group_id
        self.assignments = 0
        self.errors: list[str] = []
        self._rate = rate / members
        self._names = [f"member-{i}" for i in range(members)]
        self._owned: dict[str, list[int]] = {name: [] for name in self._names}
        self._read = {p: DigestBuilder() for p in self.partitions}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sample: LagSample | None = None
        self._threads = [
            threading.Thread(target=self._member, args=(name,), name=name, daemon=True)
            for name in self._names
        ]
        self._threads.append(threading.Thread(target=self._sampler, name="lag", daemon=True))

    def start(self) -> None:
        """Start the members and the lag sampler."""
        for thread in self._threads:
            thread.start()

    def owned(self) -> dict[str, list[int]]:
        """Return member name -> the partitions it owns now."""
        return {name: list(parts) for name, parts in self._owned.items()}

    def wait_balanced(self, timeout_s: float = 90.0) -> dict[str, list[int]]:
        """Wait until every member owns partitions and every partition has one owner.

        Raises:
            DemoDataError: not so within ``timeout_s`` seconds.
        """

        def balanced() -> dict[str, list[int]] | None:
            owned = self.owned()
            flat = sorted(p for parts in owned.values() for p in parts)
            return owned if all(owned.values()) and flat == self.partitions else None

        return wait_until(
            balanced,
            timeout_s,
            lambda: DemoDataError(
                f"group {self.group_id} not balanced after {timeout_s:.0f} s: {self.owned()}; "
                f"errors: {self.errors[:3]}"
            ),
            interval_s=0.2,
        )

    def latest(self) -> LagSample | None:
        """Return the last lag sample (None before the first)."""
        return self._sample

    def wait_caught_up(self, timeout_s: float = 120.0) -> LagSample:
        """Wait until the committed offset of every partition is its log end offset.

        Raises:
            DemoDataError: the group still lags after ``timeout_s`` seconds.
        """

        def caught_up() -> LagSample | None:
            sample = self._sample
            done = (
                sample is not None
                and sample.total == 0
                and len(sample.committed) == len(self.partitions)
            )
            return sample if done else None

        return wait_until(
            caught_up,
            timeout_s,
            lambda: DemoDataError(
                f"group {self.group_id} still lags after {timeout_s:.0f} s: {self._sample}; "
                f"errors: {self.errors[:3]}"
            ),
            interval_s=0.3,
        )

    def read(self) -> dict[int, PartitionDigest]:
        """Return partition -> digest of every record the members read (a re-read replaces)."""
        with self._lock:
            return {p: b.digest() for p, b in self._read.items()}

    def stop(self) -> None:
        """Stop the members (each leaves the group) and the sampler."""
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def _member(self, name: str) -> None:
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap_servers,
            client_id=f"{CLIENT_ID}-{name}",
            group_id=self.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=MAX_POLL_RECORDS,
            **self.security.kafka_python_kwargs(),
        )
        try:
            consumer.subscribe([self.topic], listener=_Listener(self, name))
            started, read = 0.0, 0  # the pace starts with the first records
            while not self._stop.is_set():
                batch = consumer.poll(timeout_ms=200)
                started = started or (time.monotonic() if batch else 0.0)
                with self._lock:
                    for tp, records in batch.items():
                        for record in records:
                            self._read[tp.partition].add(record.offset, record.key, record.value)
                            read += len(record.value or b"")
                if batch:
                    try:
                        consumer.commit()
                    except Exception as exc:  # a rebalance: the batch will be read again
                        self.errors.append(f"{name}: {exc!r}")
                # Pace: sleep until ``read`` bytes are due at the member's rate.
                self._stop.wait(max(0.0, started + read / self._rate - time.monotonic()))
        except Exception as exc:  # recorded; the final check reports what was not read
            self.errors.append(f"{name}: {exc!r}")
        finally:
            consumer.close()

    def admin(self) -> KafkaAdminClient:
        """Return a new kafka-python admin client connected as the members are."""
        return KafkaAdminClient(
            bootstrap_servers=self.bootstrap_servers,
            client_id=CLIENT_ID,
            **self.security.kafka_python_kwargs(),
        )

    def _sampler(self) -> None:
        admin = self.admin()
        try:
            while not self._stop.is_set():
                with suppress(Exception):  # a coordinator or leader moving: try again
                    self._sample = sample_lag(admin, self.group_id, self.topic, self.partitions)
                self._stop.wait(0.5)
        finally:
            admin.close()


def sample_lag(
    admin: KafkaAdminClient, group_id: str, topic: str, partitions: Sequence[int]
) -> LagSample:
    """Measure the group's committed offsets (OffsetFetch) and the log ends (ListOffsets).

    The admin client's ListOffsets follows a leader that moved (NOT_LEADER_OR_FOLLOWER:
    it refreshes its metadata and retries, for at most 5 s).

    Raises:
        kafka.errors.KafkaError: a request failed.
    """
    found = admin.list_group_offsets({group_id: None})[group_id]
    ends = admin.list_partition_offsets(
        {TopicPartition(topic, p): OffsetSpec.LATEST for p in partitions}, timeout_ms=5000
    )
    return LagSample(
        time.monotonic(),
        {tp.partition: o.offset for tp, o in found.items() if o.offset >= 0},
        {tp.partition: o.offset for tp, o in ends.items()},
    )


@dataclass(frozen=True)
class GroupCheck:
    """The evidence that the group lost nothing, for one partition.

    Attributes:
        partition: Partition index.
        committed: The group's committed offset (OffsetFetch), -1 if none.
        end: The log end offset.
        produced: Digest of what the producer got acknowledged.
        read: Digest of what the group's members read.
    """

    partition: int
    committed: int
    end: int
    produced: PartitionDigest
    read: PartitionDigest

    def problems(self) -> list[str]:
        """Return what does not match, as sentences (empty when all is well)."""
        name = f"group partition {self.partition}"
        out = []
        if self.committed != self.end or self.end != self.produced.records:
            out.append(
                f"{name}: committed offset {self.committed}, log end {self.end}, "
                f"{self.produced.records} records produced"
            )
        if self.read != self.produced:
            out.append(f"{name}: the members read {self.read}, produced {self.produced}")
        return out


def check_group(
    group: DemoGroup, produced: Mapping[int, PartitionDigest], timeout_s: float = 120.0
) -> list[GroupCheck]:
    """Wait for the group to commit everything, stop it, and compare with the producer.

    The topic is written only by the demo's producer from offset 0, so a partition's
    committed offset must equal its record count, and what the members read must have the
    producer's digest.

    Raises:
        DemoDataError: the group did not catch up within ``timeout_s`` seconds.
    """
    try:
        group.wait_caught_up(timeout_s)
    finally:
        group.stop()
    admin = group.admin()
    try:
        final = sample_lag(admin, group.group_id, group.topic, group.partitions)
    finally:
        admin.close()
    read = group.read()
    return [
        GroupCheck(p, final.committed.get(p, -1), final.ends[p], produced[p], read[p])
        for p in group.partitions
    ]


def lag_line(sample: LagSample | None, record_bytes: int) -> str:
    """One line about the group's lag, e.g. ``lag 1,200 records (9.4 MiB): 0:400 1:400 2:400``."""
    if sample is None:
        return "lag: not measured yet"
    per = " ".join(f"{p}:{n}" for p, n in sorted(sample.lag.items()))
    mib = sample.total * record_bytes / 2**20
    return f"lag {sample.total:,} records ({mib:.1f} MiB): {per}"


def group_table(group_id: str, topic: str, checks: Sequence[GroupCheck]) -> Table:
    """Render the group checks as a table, one row per partition."""
    table = check_table(
        f"consumer group {group_id} on {topic}",
        ("part", "committed", "log end", "produced", "read by the group"),
    )
    for c in checks:
        ok_offsets = c.committed == c.end == c.produced.records
        table.add_row(
            str(c.partition),
            f"{c.committed} {mark(ok_offsets)}",
            str(c.end),
            str(c.produced.records),
            f"{c.read.records} {mark(c.read == c.produced)}",
        )
    return table
