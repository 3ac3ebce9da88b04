"""Helpers to build and decode real v2 record batches with kafka-python's encoder.

Shared by the log tests and available to other broker tests:

    from tests.unit.broker.log.batches import make_batch, decode_records

``craft_batch`` and ``record_bytes`` build batches by hand, to send malformed bodies
behind a valid CRC.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import crc32c
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.util import encode_varint

from kpo_broker.log.records import HEADER_SIZE, HEADER_STRUCT, BatchHeader, iter_batches

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


def craft_batch(
    body: bytes,
    records_count: int,
    last_offset_delta: int | None = None,
    attributes: int = 0,
    magic: int = 2,
    base_timestamp: int = 1_000,
    max_timestamp: int = 1_000,
) -> bytes:
    """A batch around ``body`` (the records section as sent) with a valid CRC."""
    delta = records_count - 1 if last_offset_delta is None else last_offset_delta
    header = bytearray(
        HEADER_STRUCT.pack(
            0,
            HEADER_SIZE - 12 + len(body),
            -1,
            magic,
            0,
            attributes,
            delta,
            base_timestamp,
            max_timestamp,
            -1,
            -1,
            -1,
            records_count,
        )
    )
    batch = header + body
    batch[17:21] = crc32c.crc32c(bytes(batch[21:])).to_bytes(4, "big")
    return bytes(batch)


def varint(value: int) -> bytes:
    """Kafka's zigzag varint of ``value``."""
    out = bytearray()
    encode_varint(value, out.append)
    return bytes(out)


def record_bytes(
    offset_delta: int, value: bytes, timestamp_delta: int = 0, length: int | None = None
) -> bytes:
    """One v2 record; ``length`` overrides its length prefix."""
    inner = bytearray([0])  # attributes
    inner += varint(timestamp_delta)
    inner += varint(offset_delta)
    inner += varint(-1)  # null key
    inner += varint(len(value)) + value
    inner += varint(0)  # no headers
    return varint(len(inner) if length is None else length) + bytes(inner)


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
