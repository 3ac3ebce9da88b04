"""Helpers to build and decode real v2 record batches with kafka-python's encoder.

Shared by the log tests and available to other broker tests:

    from tests.unit.broker.log.batches import make_batch, decode_records
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kpo_broker.log.records import BatchHeader, iter_batches

CODEC_NONE = 0
CODEC_GZIP = 1


def make_batch(
    values: Sequence[bytes | None],
    timestamp_ms: int = 1_000,
    timestamps: Sequence[int] | None = None,
    keys: Sequence[bytes | None] | None = None,
    compression_type: int = CODEC_NONE,
    headers: Sequence[tuple[str, bytes]] = (),
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """Encode one v2 batch holding ``values`` with offset deltas 0..n-1.

    Timestamps are ``timestamps`` if given, else ``timestamp_ms + i`` for record i.
    The base offset and partition leader epoch are 0, as a producer sends them.
    """
    assert values, "a batch needs at least one record"
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression_type,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for i, value in enumerate(values):
        ts = timestamps[i] if timestamps is not None else timestamp_ms + i
        key = keys[i] if keys is not None else None
        builder.append(i, timestamp=ts, key=key, value=value, headers=list(headers))
    return bytes(builder.build())


def make_value_batch(count: int, size: int = 10, timestamp_ms: int = 1_000, tag: int = 0) -> bytes:
    """Encode a batch of ``count`` records whose values are ``size`` bytes each."""
    return make_batch(
        [bytes([(tag + i) % 256]) * size for i in range(count)], timestamp_ms=timestamp_ms
    )


@dataclass(frozen=True)
class DecodedRecord:
    """One record decoded with kafka-python's reader."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def decode_records(data: bytes) -> list[DecodedRecord]:
    """Decode every record of concatenated batches (checks each batch's CRC first)."""
    out = []
    for _header, batch in iter_batches(data, verify_crc=True):
        for record in DefaultRecordBatch(bytes(batch)):
            out.append(DecodedRecord(record.offset, record.timestamp, record.key, record.value))
    return out


def headers_of(data: bytes) -> list[BatchHeader]:
    """Headers of every batch of ``data``."""
    return [header for header, _batch in iter_batches(data)]
