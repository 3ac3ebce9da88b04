"""``python -m kpo_broker <server.properties>``: run one broker until SIGTERM/SIGINT.

SIGQUIT prints every thread's stack to stderr and the broker runs on, as a JVM's thread dump
on ``kill -3`` does for Apache Kafka: the way to see where a broker that does not stop
hangs.
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import signal
import sys
from pathlib import Path

from kpo_broker.config import BrokerConfig, ConfigError
from kpo_broker.server.broker import KafkaServer


def main(argv: list[str]) -> int:
    """Parse the properties file (plus ``KAFKA_*`` overrides) and run the broker.

    Returns:
        The process exit code: 0 after a clean shutdown, 1 on a start-up failure,
        2 on a usage or configuration error.
    """
    if len(argv) != 2:
        print("usage: python -m kpo_broker <server.properties>", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=logging.INFO,
        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    faulthandler.register(signal.SIGQUIT, all_threads=True)
    try:
        config = BrokerConfig.from_properties_file(Path(argv[1]))
    except (ConfigError, OSError) as exc:
        print(f"invalid configuration: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(_run(config))


async def _run(config: BrokerConfig) -> int:
    server = KafkaServer(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, server.shutdown_requested.set)
    try:
        await server.run()
    except ConfigError as exc:
        print(f"invalid configuration: {exc}", file=sys.stderr)
        return 2
    except Exception:
        logging.getLogger("kpo_broker").exception("broker %d failed", config.broker_id)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
