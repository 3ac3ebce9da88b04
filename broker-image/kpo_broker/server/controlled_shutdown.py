"""The broker side of controlled shutdown: ask the controller to move leadership away first.

As Kafka's ``KafkaServer.controlledShutdown``: send ControlledShutdown (v3) to the
active controller and repeat, after ``controlled.shutdown.retry.backoff.ms``, until it
answers with no remaining partitions or ``controlled.shutdown.max.retries`` attempts
fail. Either way the broker then stops; leadership of anything left moves when its
ZooKeeper registration disappears.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from kpo_broker.config import BrokerConfig
from kpo_broker.protocol.client import BrokerClient
from kpo_broker.protocol.interbroker import ControlledShutdownRequest
from kpo_broker.server.components import BrokerComponents

log = logging.getLogger(__name__)

CONTROLLED_SHUTDOWN_VERSION = 3


async def request_controlled_shutdown(components: BrokerComponents, config: BrokerConfig) -> bool:
    """Run the controlled shutdown protocol; return True once no partition is left here.

    Raises nothing: failures are logged and retried up to the configured limit.
    """
    listener = config.inter_broker_listener
    for attempt in range(1, config.controlled_shutdown_max_retries + 1):
        known = components.metadata_cache.controller_endpoint(listener)
        if known is not None:
            _, endpoint = known
            client = BrokerClient(
                endpoint.host,
                endpoint.port,
                f"controlled-shutdown-{components.broker_id}",
                request_timeout_ms=config.controller_socket_timeout_ms,
                connector=components.inter_broker_connector,
            )
            try:
                response = await client.send(
                    ControlledShutdownRequest(
                        broker_id=components.broker_id, broker_epoch=components.broker_epoch
                    ),
                    CONTROLLED_SHUTDOWN_VERSION,
                )
                remaining = response.remaining_partitions or []
                if response.error_code == 0 and not remaining:
                    log.info("controlled shutdown succeeded")
                    return True
                log.info(
                    "controlled shutdown attempt %d: error %d, %d partitions remaining",
                    attempt,
                    response.error_code,
                    len(remaining),
                )
            except Exception as exc:
                log.info("controlled shutdown attempt %d failed: %s", attempt, exc)
            finally:
                with contextlib.suppress(Exception):
                    await client.close()
        await asyncio.sleep(config.controlled_shutdown_retry_backoff_ms / 1000)
    log.warning("controlled shutdown did not complete; stopping anyway")
    return False
