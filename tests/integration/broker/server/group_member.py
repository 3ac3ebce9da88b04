"""One consumer group member in its own process, for the consumer group tests.

``python group_member.py <client> <bootstrap> <group> <topic> <out_dir> <name> [instance]``
subscribes with ``client`` (``kafka-python`` or ``confluent``; with ``instance`` as a static
member, ``group.instance.id``, KIP-345), and for every poll writes each
record's ``partition offset`` to ``<out_dir>/<name>.records`` (flushed) before
committing the batch synchronously, then each acknowledged commit's ``partition offset`` to
``<out_dir>/<name>.commits``; ``<out_dir>/<name>.assignment`` holds its current
partitions as JSON (rewritten on every assignment) and ``<out_dir>/<name>.events`` one
``assign <partitions>`` or ``revoke <partitions>`` line per callback. SIGTERM closes the
consumer (it leaves the group) and exits 0; SIGKILL is the crash the tests inflict.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

SESSION_TIMEOUT_MS = 4000
HEARTBEAT_INTERVAL_MS = 500
MAX_POLL_INTERVAL_MS = 20000

stopping = False


def _stop(_signum: int, _frame: Any) -> None:
    global stopping
    stopping = True


def _write_assignment(
    path: Path, partitions: list[int], event: str | None = None, changed: Any = ()
) -> None:
    if event is not None:
        with path.with_suffix(".events").open("a") as events:
            events.write(f"{event} {sorted(changed)}\n")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(sorted(partitions)))
    tmp.replace(path)


def _write_commits(commits: Any, offsets: dict[int, int]) -> None:
    for partition, offset in sorted(offsets.items()):
        commits.write(f"{partition} {offset}\n")
    commits.flush()


def run_kafka_python(
    bootstrap: str,
    group: str,
    topic: str,
    records: Any,
    commits: Any,
    assignment: Path,
    instance: str | None,
) -> None:
    """Consume with kafka-python's KafkaConsumer."""
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener

    owned: set[int] = set()

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            changed = [tp.partition for tp in revoked]
            owned.difference_update(changed)
            _write_assignment(assignment, list(owned), "revoke", changed)

        def on_partitions_assigned(self, assigned: Any) -> None:
            changed = [tp.partition for tp in assigned]
            owned.update(changed)
            _write_assignment(assignment, list(owned), "assign", changed)

    static = {"group_instance_id": instance} if instance else {}
    consumer = KafkaConsumer(
        **static,
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=f"member-{Path(assignment).stem}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        max_poll_interval_ms=MAX_POLL_INTERVAL_MS,
        request_timeout_ms=15000,
    )
    consumer.subscribe([topic], listener=Listener())
    while not stopping:
        batch = consumer.poll(timeout_ms=200)
        if not batch:
            continue
        positions = {}
        for tp, messages in batch.items():
            for m in messages:
                records.write(f"{tp.partition} {m.offset}\n")
            positions[tp.partition] = messages[-1].offset + 1
        records.flush()
        try:
            consumer.commit()
            _write_commits(commits, positions)
        except Exception as exc:  # a rebalance in progress: the records may be read again
            print(f"commit failed: {exc!r}", flush=True)
    consumer.close()


def run_confluent(
    bootstrap: str,
    group: str,
    topic: str,
    records: Any,
    commits: Any,
    assignment: Path,
    instance: str | None,
) -> None:
    """Consume with confluent-kafka (librdkafka)."""
    from confluent_kafka import Consumer, KafkaException

    owned: set[int] = set()

    def on_assign(_consumer: Any, partitions: Any) -> None:
        changed = [p.partition for p in partitions]
        owned.update(changed)
        _write_assignment(assignment, list(owned), "assign", changed)

    def on_revoke(_consumer: Any, partitions: Any) -> None:
        changed = [p.partition for p in partitions]
        owned.difference_update(changed)
        _write_assignment(assignment, list(owned), "revoke", changed)

    static = {"group.instance.id": instance} if instance else {}
    consumer = Consumer(
        {
            **static,
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": f"member-{Path(assignment).stem}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            "max.poll.interval.ms": MAX_POLL_INTERVAL_MS,
        }
    )
    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    while not stopping:
        messages = consumer.consume(num_messages=500, timeout=0.2)
        good = [m for m in messages if m.error() is None]
        if not good:
            continue
        for m in good:
            records.write(f"{m.partition()} {m.offset()}\n")
        records.flush()
        try:
            done = consumer.commit(asynchronous=False) or []
            _write_commits(
                commits, {p.partition: p.offset for p in done if p.error is None and p.offset >= 0}
            )
        except KafkaException as exc:
            print(f"commit failed: {exc!r}", flush=True)
    consumer.close()


def main(argv: list[str]) -> int:
    """Run one member until SIGTERM."""
    client, bootstrap, group, topic, out_dir, name = argv[:6]
    instance = argv[6] if len(argv) > 6 else None
    signal.signal(signal.SIGTERM, _stop)
    out = Path(out_dir)
    assignment = out / f"{name}.assignment"
    _write_assignment(assignment, [])
    with (
        (out / f"{name}.records").open("a") as records,
        (out / f"{name}.commits").open("a") as commits,
    ):
        run = run_kafka_python if client == "kafka-python" else run_confluent
        run(bootstrap, group, topic, records, commits, assignment, instance)
    (out / f"{name}.closed").write_text(str(time.time()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
