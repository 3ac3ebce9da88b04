"""Dispatch decoded requests to their handlers (Kafka's ``KafkaApis``).

A broker answers clients from its metadata cache, which the controller fills with
UpdateMetadata once it sees the broker registered. Until that first UpdateMetadata, client
requests wait for it (at most :data:`FIRST_METADATA_WAIT_S`), as a KRaft broker serves
only once it has caught up with the metadata log. Answered from the empty cache, a
Metadata request would name no brokers and no topics (a topic named in it is auto-created
and refused with INVALID_REPLICATION_FACTOR: no live brokers), and a client taking that
answer as the cluster's drops every broker it knew (librdkafka 2.10+ decommissions brokers
missing from a Metadata response and bootstraps again; its idempotent producer could then
stall for good, as in confluentinc/librdkafka#5301).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kpo_broker.server.apis import (
    acls,
    configs,
    data,
    elections,
    groups,
    interbroker,
    log_dirs,
    metadata,
    producer,
    reassignments,
    records,
    topics,
    users,
)
from kpo_broker.server.apis import versions as v
from kpo_broker.server.components import BrokerComponents
from kpo_broker.server.request_context import RequestContext

log = logging.getLogger(__name__)

Handler = Callable[[BrokerComponents, RequestContext, Any], Awaitable[Any | None]]

#: api key -> handler.
HANDLERS: dict[int, Handler] = {
    v.API_KEY_API_VERSIONS: metadata.handle_api_versions,
    v.API_KEY_METADATA: metadata.handle_metadata,
    v.API_KEY_DESCRIBE_CLUSTER: metadata.handle_describe_cluster,
    v.API_KEY_PRODUCE: data.handle_produce,
    v.API_KEY_FETCH: data.handle_fetch,
    v.API_KEY_LIST_OFFSETS: data.handle_list_offsets,
    v.API_KEY_OFFSET_FOR_LEADER_EPOCH: data.handle_offset_for_leader_epoch,
    v.API_KEY_LEADER_AND_ISR: interbroker.handle_leader_and_isr,
    v.API_KEY_UPDATE_METADATA: interbroker.handle_update_metadata,
    v.API_KEY_STOP_REPLICA: interbroker.handle_stop_replica,
    v.API_KEY_CONTROLLED_SHUTDOWN: interbroker.handle_controlled_shutdown,
    v.API_KEY_ALTER_PARTITION: interbroker.handle_alter_partition,
    v.API_KEY_CREATE_TOPICS: topics.handle_create_topics,
    v.API_KEY_DELETE_TOPICS: topics.handle_delete_topics,
    v.API_KEY_CREATE_PARTITIONS: topics.handle_create_partitions,
    v.API_KEY_ELECT_LEADERS: elections.handle_elect_leaders,
    v.API_KEY_INIT_PRODUCER_ID: producer.handle_init_producer_id,
    v.API_KEY_DESCRIBE_CONFIGS: configs.handle_describe_configs,
    v.API_KEY_ALTER_CONFIGS: configs.handle_alter_configs,
    v.API_KEY_INCREMENTAL_ALTER_CONFIGS: configs.handle_incremental_alter_configs,
    v.API_KEY_DESCRIBE_LOG_DIRS: log_dirs.handle_describe_log_dirs,
    v.API_KEY_ALTER_REPLICA_LOG_DIRS: log_dirs.handle_alter_replica_log_dirs,
    v.API_KEY_ALTER_PARTITION_REASSIGNMENTS: reassignments.handle_alter_partition_reassignments,
    v.API_KEY_LIST_PARTITION_REASSIGNMENTS: reassignments.handle_list_partition_reassignments,
    v.API_KEY_SASL_HANDSHAKE: users.handle_sasl_handshake,
    v.API_KEY_SASL_AUTHENTICATE: users.handle_sasl_authenticate,
    v.API_KEY_DESCRIBE_USER_SCRAM_CREDENTIALS: users.handle_describe_user_scram_credentials,
    v.API_KEY_ALTER_USER_SCRAM_CREDENTIALS: users.handle_alter_user_scram_credentials,
    v.API_KEY_FIND_COORDINATOR: groups.handle_find_coordinator,
    v.API_KEY_JOIN_GROUP: groups.handle_join_group,
    v.API_KEY_SYNC_GROUP: groups.handle_sync_group,
    v.API_KEY_HEARTBEAT: groups.handle_heartbeat,
    v.API_KEY_LEAVE_GROUP: groups.handle_leave_group,
    v.API_KEY_OFFSET_COMMIT: groups.handle_offset_commit,
    v.API_KEY_OFFSET_FETCH: groups.handle_offset_fetch,
    v.API_KEY_LIST_GROUPS: groups.handle_list_groups,
    v.API_KEY_DESCRIBE_GROUPS: groups.handle_describe_groups,
    v.API_KEY_DELETE_GROUPS: groups.handle_delete_groups,
    v.API_KEY_OFFSET_DELETE: groups.handle_offset_delete,
    v.API_KEY_DELETE_RECORDS: records.handle_delete_records,
    v.API_KEY_DESCRIBE_ACLS: acls.handle_describe_acls,
    v.API_KEY_CREATE_ACLS: acls.handle_create_acls,
    v.API_KEY_DELETE_ACLS: acls.handle_delete_acls,
}


#: How long a client request waits for the broker's first UpdateMetadata, s; after it, the
#: request is answered from the cache as it is (Kafka's ZooKeeper-mode behaviour).
FIRST_METADATA_WAIT_S = 10.0

#: Requests answered without waiting for the first UpdateMetadata: the controller's and the
#: ones sent to the controller (which must flow for the metadata to come), and those a
#: client sends before anything else on a connection (ApiVersions, SASL).
ANSWERED_BEFORE_METADATA = frozenset(
    {
        *v.INTER_BROKER_APIS,
        v.API_KEY_API_VERSIONS,
        v.API_KEY_SASL_HANDSHAKE,
        v.API_KEY_SASL_AUTHENTICATE,
    }
)


class KafkaApis:
    """Routes each request to the handler of its API key.

    Args:
        broker: the components handlers work with.
        handlers: api key -> handler.
    """

    def __init__(self, broker: BrokerComponents, handlers: dict[int, Handler]) -> None:
        self.broker = broker
        self.handlers = handlers
        self._metadata_ready = asyncio.Event()
        if broker.metadata_cache.initialized:
            self._metadata_ready.set()

    async def handle(self, ctx: RequestContext, request: Any) -> Any | None:
        """Run the handler; a handler failure is logged and re-raised (the connection closes).

        A client request that comes before the broker's first UpdateMetadata waits for it
        first (see the module's docstring).

        Raises:
            KeyError: no handler for ``ctx.api_key`` (the socket server only passes
                supported keys, so this means a table is inconsistent).
        """
        handler = self.handlers[ctx.api_key]
        ready = self._metadata_ready
        if not ready.is_set() and ctx.api_key not in ANSWERED_BEFORE_METADATA:
            await self._wait_for_metadata(ctx)
        try:
            return await handler(self.broker, ctx, request)
        except Exception:
            log.exception("handler for api key %d v%d failed", ctx.api_key, ctx.api_version)
            raise
        finally:
            if not ready.is_set() and self.broker.metadata_cache.initialized:
                ready.set()

    async def _wait_for_metadata(self, ctx: RequestContext) -> None:
        """Wait for the first UpdateMetadata, at most :data:`FIRST_METADATA_WAIT_S`."""
        try:
            async with asyncio.timeout(FIRST_METADATA_WAIT_S):
                await self._metadata_ready.wait()
        except TimeoutError:
            log.warning(
                "no UpdateMetadata from the controller after %.0f s; answering api key %d "
                "from an empty metadata cache",
                FIRST_METADATA_WAIT_S,
                ctx.api_key,
            )
