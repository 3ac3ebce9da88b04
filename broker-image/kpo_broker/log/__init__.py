"""The broker's storage layer: partition logs made of segments, indexes and checkpoints.

Modelled on Kafka's log layer (``kafka.log``: ``UnifiedLog``, ``LocalLog``,
``LogSegment``, ``LogManager``; KIP-98 batches, KIP-101 leader epochs): ``records`` (v2
batches), ``index`` (offset/time indexes), ``segment``, ``epoch`` (leader epoch cache),
``checkpoints``, ``log`` (one partition) and ``manager`` (all log dirs).
"""

from kpo_broker.log.config import LogConfig
from kpo_broker.log.epoch import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCache,
)
from kpo_broker.log.filerecords import FileSlice
from kpo_broker.log.info import FetchDataInfo, LogAppendInfo, OffsetAndTimestamp
from kpo_broker.log.log import Log
from kpo_broker.log.log_dirs import LogDirInfo, PartitionDirInfo
from kpo_broker.log.manager import LogManager
from kpo_kafka.topic_partition import TopicPartition

__all__ = [
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "EpochEntry",
    "FetchDataInfo",
    "FileSlice",
    "LeaderEpochCache",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "LogDirInfo",
    "LogManager",
    "OffsetAndTimestamp",
    "PartitionDirInfo",
    "TopicPartition",
]
