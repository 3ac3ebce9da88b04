"""One member of the rebalance benchmark's group, as its own process (run as a script).

``python group_member.py <bootstrap> <group> <topic> <session_timeout_ms>`` subscribes with
confluent-kafka (librdkafka, the eager ``range,roundrobin`` assignors) and prints one line per
rebalance callback, flushed: ``<time.time()> assign <p,p,...>`` or ``<time.time()> revoke
<p,...>`` (see :func:`kpo_bench.groups.parse_member_events`). It polls until killed
(SIGKILL is what the benchmark does to one member) or SIGTERM (it closes and leaves).
"""

from __future__ import annotations

import signal
import sys
import time
from typing import Any

stopping = False


def _stop(_signum: int, _frame: Any) -> None:
    global stopping
    stopping = True


def _say(kind: str, partitions: Any) -> None:
    listed = ",".join(str(p.partition) for p in partitions)
    print(f"{time.time():.6f} {kind} {listed}", flush=True)


def main(argv: list[str]) -> int:
    """Consume (discarding records) until SIGTERM."""
    from confluent_kafka import Consumer

    bootstrap, group, topic, session_timeout_ms = argv[:4]
    signal.signal(signal.SIGTERM, _stop)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "session.timeout.ms": int(session_timeout_ms),
            "heartbeat.interval.ms": max(int(session_timeout_ms) // 6, 100),
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 2,
        }
    )
    consumer.subscribe(
        [topic],
        on_assign=lambda _c, parts: _say("assign", parts),
        on_revoke=lambda _c, parts: _say("revoke", parts),
    )
    while not stopping:
        consumer.poll(0.1)
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
