"""Filtering record batches for the log cleaner (pure logic).

Kafka's ``MemoryRecords.filterTo`` with the ``RecordFilter`` of ``Cleaner.cleanInto``, for
message format v2 (the only one this broker stores):

* a record is kept if its offset is past the offset map's ``latest_offset``, or if it has
  a key whose latest mapped offset is its own and it has a value, or it is a tombstone
  whose batch has no delete horizon yet or one still in the future (KIP-534). A record
  without a key is dropped (Kafka counts it as invalid);
* a batch keeping every record is written unchanged, unless it holds a tombstone and has
  no delete horizon yet: then it is rewritten with ``baseTimestamp`` = now +
  ``delete.retention.ms`` and attribute bit 6 set, record timestamp deltas rebased on it;
* a batch keeping some records is rewritten with them, keeping its base offset, last
  offset delta, producer id, epoch and base sequence (so the producer's last sequence
  survives) and its compression codec;
* a batch keeping none is dropped, except the last batch of an active idempotent
  producer and the batch ending at the cleaning round's upper bound, which stay as an
  empty batch header (Kafka's ``BatchRetention.RETAIN_EMPTY``);
* control batches (transaction markers) are kept as they are: this broker writes none,
  so there is no aborted transaction whose records or markers could be removed.

Offsets are never reassigned: every kept record keeps its offset delta.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import crc32c
from kafka.codec import gzip_encode, lz4_encode, snappy_encode, zstd_encode
from kafka.record.util import decode_varint, encode_varint

from kpo_broker.log.compression import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NONE,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    decompress_records,
)
from kpo_broker.log.errors import CorruptRecordError
from kpo_broker.log.offset_map import OffsetMap
from kpo_broker.log.records import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    iter_batches,
)

#: Attribute bit 6: ``baseTimestamp`` holds the batch's delete horizon (KIP-534).
DELETE_HORIZON_MASK = 0x40
_UINT32 = struct.Struct(">I")
_ENCODERS: dict[int, Callable[[bytes], bytes]] = {
    CODEC_GZIP: gzip_encode,
    CODEC_SNAPPY: snappy_encode,
    CODEC_LZ4: lz4_encode,
    CODEC_ZSTD: zstd_encode,
}


def has_delete_horizon(header: BatchHeader) -> bool:
    """Tell whether the batch's ``baseTimestamp`` is a delete horizon (attribute bit 6)."""
    return bool(header.attributes & DELETE_HORIZON_MASK)


@dataclass(frozen=True)
class Record:
    """One record of a v2 batch, as the cleaner needs it.

    Attributes:
        offset_delta: offset relative to the batch's base offset.
        timestamp: the record's timestamp in ms (the batch's ``maxTimestamp`` for
            LogAppendTime batches).
        key: the key, None if the record has none.
        value: the value, None for a tombstone.
        headers: the encoded header count and headers, copied as they are.
    """

    offset_delta: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: bytes


def _read_bytes(body: bytes, position: int) -> tuple[bytes | None, int]:
    length, position = decode_varint(body, position)
    if length < 0:
        return None, position
    end = position + length
    if end > len(body):
        raise CorruptRecordError("record field runs past the end of its record")
    return body[position:end], end


def decode_records(
    header: BatchHeader, batch: bytes | memoryview, max_decompressed_bytes: int
) -> list[Record]:
    """Decode every record of one v2 batch (decompressing its records section).

    Raises:
        CorruptRecordError: the records section is malformed or holds fewer records
            than ``recordsCount``.
        RecordTooLargeError: it inflates beyond ``max_decompressed_bytes``.
        UnsupportedCompressionTypeError: the codec's library is missing.
    """
    body = decompress_records(header.compression_type, batch[HEADER_SIZE:], max_decompressed_bytes)
    log_append_time = header.is_log_append_time
    records: list[Record] = []
    position = 0
    try:
        for _ in range(header.records_count):
            length, position = decode_varint(body, position)
            end = position + length
            if length < 0 or end > len(body):
                raise CorruptRecordError("record runs past the end of its batch")
            cursor = position + 1  # attributes, unused in v2
            timestamp_delta, cursor = decode_varint(body, cursor)
            offset_delta, cursor = decode_varint(body, cursor)
            key, cursor = _read_bytes(body, cursor)
            value, cursor = _read_bytes(body, cursor)
            if cursor > end:
                raise CorruptRecordError("record fields run past the record's length")
            timestamp = (
                header.max_timestamp
                if log_append_time
                else (header.base_timestamp + timestamp_delta)
            )
            records.append(Record(offset_delta, timestamp, key, value, body[cursor:end]))
            position = end
    except (IndexError, ValueError) as exc:
        raise CorruptRecordError(f"records section of batch {header.base_offset}: {exc}") from exc
    return records


def _encode_bytes(data: bytes | None, out: bytearray) -> None:
    if data is None:
        encode_varint(-1, out.append)
    else:
        encode_varint(len(data), out.append)
        out += data


def _encode_record(record: Record, base_timestamp: int) -> bytes:
    body = bytearray(b"\x00")  # attributes
    encode_varint(record.timestamp - base_timestamp, body.append)
    encode_varint(record.offset_delta, body.append)
    _encode_bytes(record.key, body)
    _encode_bytes(record.value, body)
    body += record.headers
    out = bytearray()
    encode_varint(len(body), out.append)
    return bytes(out + body)


def _write_batch(
    header: BatchHeader,
    attributes: int,
    base_timestamp: int,
    max_timestamp: int,
    records_count: int,
    section: bytes,
) -> tuple[bytes, BatchHeader]:
    """Assemble a batch from ``header``'s offsets and producer fields; compute its CRC."""
    size = HEADER_SIZE + len(section)
    new_header = BatchHeader(
        base_offset=header.base_offset,
        batch_length=size - LOG_OVERHEAD,
        partition_leader_epoch=header.partition_leader_epoch,
        magic=header.magic,
        crc=0,
        attributes=attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records_count=records_count,
    )
    out = bytearray(HEADER_STRUCT.pack(*dataclasses.astuple(new_header)))
    out += section
    crc = crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:])
    _UINT32.pack_into(out, CRC_OFFSET, crc)
    return bytes(out), dataclasses.replace(new_header, crc=crc)


def build_batch(
    header: BatchHeader, records: list[Record], delete_horizon_ms: int
) -> tuple[bytes, BatchHeader]:
    """Rebuild ``header``'s batch holding only ``records`` (Kafka's ``buildRetainedRecordsInto``).

    The base offset, last offset delta, leader epoch, producer fields, timestamp type,
    transactional and control flags and the codec are the original batch's.

    Args:
        header: the original batch's header.
        records: the kept records, in order, non-empty.
        delete_horizon_ms: the delete horizon to store as ``baseTimestamp`` (with
            attribute bit 6), or -1 for none (the first record's timestamp is the base).

    Returns:
        The batch bytes and its header.
    """
    codec = header.compression_type
    attributes = header.attributes & (
        COMPRESSION_MASK | TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK
    )
    if delete_horizon_ms >= 0:
        attributes |= DELETE_HORIZON_MASK
        base_timestamp = delete_horizon_ms
    else:
        base_timestamp = records[0].timestamp
    if header.is_log_append_time:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = max(record.timestamp for record in records)
    section = b"".join(_encode_record(record, base_timestamp) for record in records)
    if codec != CODEC_NONE:
        section = _ENCODERS[codec](section)
    return _write_batch(header, attributes, base_timestamp, max_timestamp, len(records), section)


def empty_batch(header: BatchHeader) -> tuple[bytes, BatchHeader]:
    """Kafka's ``DefaultRecordBatch.writeEmptyHeader``: the batch's header with no records.

    Keeps offsets, producer fields, leader epoch, timestamp type, transactional and
    control flags and ``maxTimestamp``; no codec, ``baseTimestamp`` -1, no delete horizon.
    """
    attributes = header.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK)
    return _write_batch(header, attributes, NO_TIMESTAMP, header.max_timestamp, 0, b"")


@dataclass(frozen=True)
class CleanerFilter:
    """What decides which records of a segment the cleaner keeps.

    Attributes:
        offset_map: key -> latest offset of the dirty section being cleaned.
        now_ms: when the cleaning started (tombstone horizons are compared with it).
        delete_retention_ms: ``delete.retention.ms`` of the log.
        last_offsets_of_active_producers: producer id -> last offset of its latest
            batch, from the log's producer state (those batches stay, even empty).
        upper_bound_offset: the first offset not cleaned in this round; the batch ending
            right before it stays, even empty, so the log's end offset is kept.
        max_decompressed_bytes: bound on one batch's inflated records section.
    """

    offset_map: OffsetMap
    now_ms: int
    delete_retention_ms: int
    last_offsets_of_active_producers: Mapping[int, int]
    upper_bound_offset: int
    max_decompressed_bytes: int

    def retain_record(self, header: BatchHeader, record: Record) -> bool:
        """Kafka's ``Cleaner.shouldRetainRecord`` for a v2 data record."""
        offset = header.base_offset + record.offset_delta
        if offset > self.offset_map.latest_offset:
            return True
        if record.key is None:
            return False
        if offset < self.offset_map.get(record.key):
            return False
        if record.value is not None:
            return True
        return not has_delete_horizon(header) or self.now_ms < header.base_timestamp

    def retain_empty(self, header: BatchHeader) -> bool:
        """Tell whether a batch left without records stays as an empty header."""
        if header.producer_id >= 0:
            last = self.last_offsets_of_active_producers.get(header.producer_id)
            if last is not None and last == header.last_offset:
                return True
        return header.next_offset == self.upper_bound_offset


@dataclass
class FilterResult:
    """The batches a filter kept from a chunk of a segment, and counts for the statistics.

    Attributes:
        data: the kept batches, concatenated.
        headers: their headers, in order.
        messages_read: records read.
        messages_retained: records kept.
        bytes_read: bytes of the input batches.
    """

    data: bytearray
    headers: list[BatchHeader]
    messages_read: int = 0
    messages_retained: int = 0
    bytes_read: int = 0


def filter_batches(data: bytes | memoryview, cleaner: CleanerFilter) -> FilterResult:
    """Filter whole v2 batches (a segment chunk) as the cleaner does; see the module doc.

    Raises:
        CorruptRecordError: a batch is torn, fails its CRC or cannot be decoded.
        RecordTooLargeError, UnsupportedCompressionTypeError: see ``decode_records``.
    """
    result = FilterResult(bytearray(), [])
    for header, batch in iter_batches(data, verify_crc=True):
        result.bytes_read += len(batch)
        if header.is_control:
            result.data += batch
            result.headers.append(header)
            continue
        records = decode_records(header, batch, cleaner.max_decompressed_bytes)
        result.messages_read += len(records)
        kept = [record for record in records if cleaner.retain_record(header, record)]
        result.messages_retained += len(kept)
        if kept:
            tombstones = any(record.value is None for record in kept)
            needs_horizon = tombstones and not has_delete_horizon(header)
            if len(kept) == len(records) and not needs_horizon:
                result.data += batch
                result.headers.append(header)
                continue
            if needs_horizon:
                horizon = cleaner.now_ms + cleaner.delete_retention_ms
            else:
                horizon = header.base_timestamp if has_delete_horizon(header) else NO_TIMESTAMP
            out, new_header = build_batch(header, kept, horizon)
        elif cleaner.retain_empty(header):
            out, new_header = empty_batch(header)
        else:
            continue
        result.data += out
        result.headers.append(new_header)
    return result


def keyed_records(
    header: BatchHeader, batch: bytes | memoryview, max_decompressed_bytes: int
) -> Iterator[tuple[bytes, int]]:
    """Yield ``(key, offset)`` of each keyed record of a data batch (offset map building).

    Control batches yield nothing.

    Raises:
        As ``decode_records``.
    """
    if header.is_control:
        return
    for record in decode_records(header, batch, max_decompressed_bytes):
        if record.key is not None:
            yield record.key, header.base_offset + record.offset_delta
