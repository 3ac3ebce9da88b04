"""Check a finished move: metadata, every record read back, and the data on each new replica.

Kafka consumers fetch only from partition leaders (without KIP-392's
``replica.selector.class``), so reading through Kafka proves the data on the
leader only. For every new replica (RAR - OAR, KIP-455), leader or follower, the
demo therefore also decodes that broker's own log segment files on disk
(CRC32C-checked v2 batches) and requires the same records at the same offsets
as the producer got acknowledged. DescribeLogDirs sizes of all replicas of a
partition must be equal too, since followers copy the leader's batches byte for byte.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from rich import box
from rich.table import Table

from kpo_devenv.demo_data import (
    CLIENT_ID,
    DemoDataError,
    PartitionDigest,
    read_log_dir,
    read_via_consumer,
)
from kpo_kafka.admin import KafkaAdmin, KafkaPythonAdmin
from kpo_kafka.admin_types import PartitionInfo
from kpo_kafka.client_config import ClientSecurity

HOW_CHECKED = """How the data is checked:
 • the producer (acks=all) kept, per partition, the record count and a SHA-256
   over (offset, key, value) of every acknowledged record;
 • a KafkaConsumer reads every partition back from its current leader;
 • consumers fetch only from leaders, so for each new replica, leader or not,
   the demo also decodes that broker's own segment files (every batch's CRC
   checked) and compares them with the producer's digest;
 • DescribeLogDirs must report the same size for every replica of a partition."""


@dataclass(frozen=True)
class PartitionCheck:
    """The evidence for one partition after the move.

    Attributes:
        partition: Partition index.
        original: Replicas before the move (OAR).
        expected: Replicas asked for (RAR); equal to ``original`` if it did not move.
        state: Replicas, ISR and leader from the Metadata API after the move.
        produced: Digest of what the producer got acknowledged.
        via_leader: Digest of what a consumer read (from the leader).
        on_disk: new replica's broker id -> digest of its segment files.
        sizes: broker id -> replica size from DescribeLogDirs, bytes.
    """

    partition: int
    original: tuple[int, ...]
    expected: tuple[int, ...]
    state: PartitionInfo
    produced: PartitionDigest
    via_leader: PartitionDigest
    on_disk: dict[int, PartitionDigest] = field(default_factory=dict)
    sizes: dict[int, int] = field(default_factory=dict)

    def problems(self) -> list[str]:
        """Return what does not match, as sentences (empty when all is well)."""
        out = []
        name = f"partition {self.partition}"
        if self.state.replicas != self.expected:
            out.append(
                f"{name}: replicas {list(self.state.replicas)}, wanted {list(self.expected)}"
            )
        if set(self.state.isr) != set(self.expected):
            out.append(f"{name}: ISR {list(self.state.isr)} is not {list(self.expected)}")
        if self.via_leader != self.produced:
            out.append(f"{name}: consumer read {self.via_leader}, produced {self.produced}")
        for broker, digest in self.on_disk.items():
            if digest != self.produced:
                out.append(
                    f"{name}: broker {broker}'s log holds {digest}, produced {self.produced}"
                )
        if len(set(self.sizes.values())) > 1:
            out.append(f"{name}: replica sizes differ: {self.sizes}")
        if set(self.sizes) != set(self.expected):
            out.append(f"{name}: DescribeLogDirs lists replicas on {sorted(self.sizes)}")
        return out


def wait_for_placement(
    admin: KafkaAdmin,
    topic: str,
    expected: Mapping[int, Sequence[int]],
    timeout_s: float = 30.0,
) -> dict[int, PartitionInfo]:
    """Poll Metadata until each partition has the ``expected`` replicas, all in the ISR.

    Returns:
        The last metadata seen (possibly still different after ``timeout_s`` seconds;
        :meth:`PartitionCheck.problems` then reports it).

    Raises:
        DemoDataError: the topic does not exist.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        states = admin.describe_topics([topic]).get(topic)
        if states is None:
            raise DemoDataError(f"topic {topic!r} not found in the metadata")
        done = all(
            p in states
            and states[p].replicas == tuple(r)
            and set(states[p].isr) == set(r)
            and states[p].leader in r
            for p, r in expected.items()
        )
        if done or time.monotonic() > deadline:
            return states
        time.sleep(0.5)


def replica_sizes(admin: KafkaAdmin, topic: str) -> dict[tuple[int, int], int]:
    """Return (broker id, partition) -> replica size of ``topic``, bytes (DescribeLogDirs).

    Future replicas of a log-dir move (KIP-113) are left out.
    """
    return {
        (broker, partition): info.size_bytes
        for (broker, _, partition), info in admin.describe_log_dirs(topics=[topic]).items()
    }


def verify_move(
    bootstrap_servers: str,
    topic: str,
    original: Mapping[int, Sequence[int]],
    target: Mapping[int, Sequence[int]],
    log_dirs: Mapping[int, Sequence[Path]],
    produced: Mapping[int, PartitionDigest],
    security: ClientSecurity | None = None,
) -> list[PartitionCheck]:
    """Collect the evidence for every partition of ``topic``.

    Args:
        bootstrap_servers: ``host:port[,...]``.
        topic: The demo's topic.
        original: partition -> replicas before the move.
        target: partition -> replicas asked for (only the moved partitions).
        log_dirs: broker id -> its ``log.dirs``.
        produced: partition -> digest from :func:`~kpo_devenv.demo_data.produce`.
        security: How the checks connect (TLS, SASL); None: PLAINTEXT.

    Returns:
        One check per partition, in partition order.

    Raises:
        DemoDataError: the topic does not exist.
        kpo_kafka.admin_types.KafkaAdminError: a Metadata or DescribeLogDirs request failed.
    """
    expected = {p: tuple(target.get(p, r)) for p, r in original.items()}
    with closing(KafkaPythonAdmin(bootstrap_servers, CLIENT_ID, security=security)) as admin:
        states = wait_for_placement(admin, topic, expected)
        read = read_via_consumer(bootstrap_servers, topic, sorted(original), security=security)
        sizes = replica_sizes(admin, topic)
    checks = []
    for p in sorted(original):
        new = [b for b in expected[p] if b not in original[p]]
        checks.append(
            PartitionCheck(
                partition=p,
                original=tuple(original[p]),
                expected=expected[p],
                state=states.get(p, PartitionInfo(replicas=())),
                produced=produced[p],
                via_leader=read[p],
                on_disk={b: read_log_dir(log_dirs[b], topic, p) for b in new},
                sizes={b: size for (b, q), size in sorted(sizes.items()) if q == p},
            )
        )
    return checks


def mark(ok: bool) -> str:
    """Return a check's outcome as rich markup: a green tick or a red cross."""
    return "[green]✓[/]" if ok else "[red]✗[/]"


def check_table(title: str, columns: Sequence[str]) -> Table:
    """Return an empty table in the demo's style with ``columns`` (not wrapped) for its checks."""
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        collapse_padding=True,
        show_edge=False,
    )
    for column in columns:
        table.add_column(column, no_wrap=True)
    return table


def _short(replicas: Sequence[int]) -> str:
    return "[" + ",".join(map(str, replicas)) + "]"


def checks_table(topic: str, checks: Sequence[PartitionCheck]) -> Table:
    """Render the checks as a table, one row per partition (details of failures are in problems)."""
    table = check_table(
        f"topic {topic}",
        ("part", "replicas", "leader", "ISR", "leader read", "new replica log", "sizes"),
    )
    for c in checks:
        replicas = _short(c.state.replicas)
        if c.original != c.expected:
            replicas = f"{_short(c.original)}→{replicas}"
        equal_sizes = len(set(c.sizes.values())) == 1
        table.add_row(
            str(c.partition),
            f"{replicas} {mark(c.state.replicas == c.expected)}",
            str(c.state.leader),
            f"{_short(c.state.isr)} {mark(set(c.state.isr) == set(c.expected))}",
            f"{c.via_leader.records} {mark(c.via_leader == c.produced)}",
            ", ".join(f"broker {b} {mark(d == c.produced)}" for b, d in c.on_disk.items())
            or "(not moved)",
            f"{'equal' if equal_sizes else 'differ'} {mark(equal_sizes)}",
        )
    return table
