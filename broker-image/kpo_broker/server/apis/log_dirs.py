"""DescribeLogDirs (api key 35) and AlterReplicaLogDirs (api key 34): KIP-113.

DescribeLogDirs lists each log dir of this broker with its partitions (size in bytes,
offset lag, future flag) and, from v4 (KIP-827), the volume's total and usable bytes.
AlterReplicaLogDirs starts intra-broker moves: the replica gets a future log in the
named dir, which the alter-log-dirs copier (``server.log_dir_mover``) fills and swaps in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafka import errors as kafka_errors
from kafka.protocol.admin import AlterReplicaLogDirsResponse, DescribeLogDirsResponse

from kpo_broker.log.errors import LogError
from kpo_broker.log.log_dirs import LogDirInfo
from kpo_broker.security.acl import AclOperation
from kpo_broker.server.components import BrokerComponents
from kpo_broker.server.request_context import RequestContext
from kpo_kafka.topic_partition import TopicPartition

_DirResult = DescribeLogDirsResponse.DescribeLogDirsResult
_DirTopic = _DirResult.DescribeLogDirsTopic
_DirPartition = _DirTopic.DescribeLogDirsPartition
_AlterTopic = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
_AlterPartition = _AlterTopic.AlterReplicaLogDirPartitionResult

#: LOG_DIR_NOT_FOUND: the path is not one of the broker's log dirs.
LOG_DIR_NOT_FOUND = 57
#: KAFKA_STORAGE_ERROR: the future log could not be created.
KAFKA_STORAGE_ERROR = 56
_CLUSTER_AUTHORIZATION_FAILED = 31


def _describe_dir(info: LogDirInfo, wanted: dict[str, set[int]] | None) -> Any:
    if not info.online:  # Kafka: KAFKA_STORAGE_ERROR, no topics, no volume totals
        return _DirResult(
            error_code=KAFKA_STORAGE_ERROR,
            log_dir=str(info.path),
            topics=[],
            total_bytes=-1,
            usable_bytes=-1,
        )
    by_topic: dict[str, list[Any]] = {}
    for part in info.partitions:
        topic, index = part.topic_partition
        if wanted is not None and index not in wanted.get(topic, ()):
            continue
        by_topic.setdefault(topic, []).append(
            _DirPartition(
                partition_index=index,
                partition_size=part.size_in_bytes,
                offset_lag=part.offset_lag,
                is_future_key=part.is_future,
            )
        )
    return _DirResult(
        error_code=0,
        log_dir=str(info.path),
        topics=[_DirTopic(name=t, partitions=p) for t, p in by_topic.items()],
        total_bytes=info.total_bytes,
        usable_bytes=info.usable_bytes,
    )


async def handle_describe_log_dirs(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> DescribeLogDirsResponse:
    """Describe every log dir; ``topics`` null means every partition.

    A dir taken offline by an I/O error (``LogDirFailureChannel``) is answered with
    KAFKA_STORAGE_ERROR and nothing else, as Kafka's ``ReplicaManager.describeLogDirs``.
    """
    if not broker.auth.authorize_cluster(ctx, AclOperation.DESCRIBE):
        # Kafka's handleDescribeLogDirsRequest: Describe on the cluster, else no dirs.
        return DescribeLogDirsResponse(
            throttle_time_ms=0, error_code=_CLUSTER_AUTHORIZATION_FAILED, results=[]
        )
    wanted: dict[str, set[int]] | None = None
    if request.topics is not None:
        wanted = {}
        for topic in request.topics:
            wanted.setdefault(topic.topic, set()).update(topic.partitions)
    infos = broker.log_manager.describe_log_dirs()
    return DescribeLogDirsResponse(
        throttle_time_ms=0,
        error_code=0,
        results=[_describe_dir(info, wanted) for info in infos],
    )


def alter_replica_log_dir(broker: BrokerComponents, tp: TopicPartition, log_dir: Path) -> int:
    """Move (or place) this broker's replica of ``tp`` into ``log_dir``; return an error code.

    As Kafka's ``ReplicaManager.alterReplicaLogDirs`` (KIP-113):

    * ``log_dir`` not a log dir of this broker: LOG_DIR_NOT_FOUND;
    * partition not hosted: the dir is remembered so the replica is created there when
      LeaderAndIsr arrives, answered REPLICA_NOT_AVAILABLE;
    * already in ``log_dir``: a move elsewhere in progress is aborted; no error;
    * otherwise a future log is created there (replacing a future log in another dir)
      and the copier is woken; no error.
    """
    manager = broker.log_manager
    if Path(log_dir) not in manager.log_dirs:
        return LOG_DIR_NOT_FOUND
    current = manager.get_log(tp.topic, tp.partition)
    if broker.replica_manager.get_partition(tp) is None or current is None:
        manager.set_preferred_log_dir(tp.topic, tp.partition, log_dir)
        return int(kafka_errors.ReplicaNotAvailableError.errno)
    if current.dir.parent == Path(log_dir):
        manager.abort_future_log(tp.topic, tp.partition)
        return 0
    try:
        manager.create_future_log(tp.topic, tp.partition, log_dir)
    except (LogError, OSError):
        return KAFKA_STORAGE_ERROR
    if broker.log_dir_mover is not None:
        broker.log_dir_mover.wake()
    return 0


async def handle_alter_replica_log_dirs(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> AlterReplicaLogDirsResponse:
    """Apply each (dir, topic, partitions) entry with ``alter_replica_log_dir``."""
    # Kafka's handleAlterReplicaLogDirsRequest: Alter on the cluster, else every
    # partition is refused.
    allowed = broker.auth.authorize_cluster(ctx, AclOperation.ALTER)
    by_topic: dict[str, list[Any]] = {}
    for entry in request.dirs:
        for topic in entry.topics:
            for index in topic.partitions:
                code = (
                    alter_replica_log_dir(
                        broker, TopicPartition(topic.name, index), Path(entry.path)
                    )
                    if allowed
                    else _CLUSTER_AUTHORIZATION_FAILED
                )
                by_topic.setdefault(topic.name, []).append(
                    _AlterPartition(partition_index=index, error_code=code)
                )
    return AlterReplicaLogDirsResponse(
        throttle_time_ms=0,
        results=[_AlterTopic(topic_name=t, partitions=p) for t, p in by_topic.items()],
    )
