"""Magic v2 record batches: header parsing, validation and offset assignment (pure logic).

Layout of one batch (Kafka's ``DefaultRecordBatch``, message format v2 from KIP-98,
which replaced the v0/v1 message sets of Kafka's documentation before 0.11,
"Implementation: Message Format"), big-endian::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
    crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
    maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 |
    recordsCount int32 | records...

``batchLength`` counts the bytes after itself, so a batch occupies ``batchLength + 12``
bytes. The CRC32C covers ``attributes`` to the end, so the broker may rewrite
``baseOffset`` and ``partitionLeaderEpoch`` without recomputing it.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c
from kafka.errors import CorruptRecordError as KafkaPythonCorruptRecordError
from kafka.errors import UnsupportedCodecError
from kafka.record.default_records import DefaultRecordBatch

from kpo_broker.log.errors import CorruptRecordError, UnsupportedCompressionTypeError

MAGIC_V2 = 2
HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER_STRUCT.size  # 61 bytes, Kafka's RECORD_BATCH_OVERHEAD
LOG_OVERHEAD = 12  # baseOffset + batchLength, Kafka's Records.LOG_OVERHEAD
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
PARTITION_LEADER_EPOCH_OFFSET = 12
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20

_BASE_OFFSET = struct.Struct(">q")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")


@dataclass(frozen=True)
class BatchHeader:
    """The fixed 61-byte header of one v2 record batch (field meanings in the module doc).

    Offsets are absolute (``base_offset`` as stored in the batch); timestamps in ms.
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        """Offset of the batch's last record: ``base_offset + last_offset_delta``."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """The offset right after this batch: ``last_offset + 1``."""
        return self.last_offset + 1

    @property
    def size_in_bytes(self) -> int:
        """Bytes the whole batch occupies: ``batch_length + 12``."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression_type(self) -> int:
        """Codec id from attributes bits 0-2: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        """True if attributes bit 3 marks LogAppendTime timestamps (else CreateTime)."""
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        """True if attributes bit 4 marks a transactional batch (KIP-98)."""
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        """True if attributes bit 5 marks a control batch (transaction markers)."""
        return bool(self.attributes & CONTROL_MASK)


def parse_header(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Decode the batch header starting at ``position`` without checking the CRC.

    Args:
        buf: bytes holding at least ``HEADER_SIZE`` bytes from ``position``.
        position: byte position of the batch's ``baseOffset`` field.

    Raises:
        CorruptRecordError: fewer than 61 bytes available, ``batchLength`` below the
            header size, or a magic other than 2 (only v2 is accepted).
    """
    if len(buf) - position < HEADER_SIZE:
        raise CorruptRecordError(
            f"only {len(buf) - position} bytes at position {position}, "
            f"a batch header needs {HEADER_SIZE}"
        )
    header = BatchHeader(*HEADER_STRUCT.unpack_from(buf, position))
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at position {position} has length {header.batch_length}, "
            f"below the minimum {MIN_BATCH_LENGTH}"
        )
    if header.magic != MAGIC_V2:
        raise CorruptRecordError(
            f"batch at position {position} has magic {header.magic}; only v2 is supported"
        )
    return header


def crc_matches(header: BatchHeader, batch: bytes | bytearray | memoryview) -> bool:
    """Check that the CRC32C of ``batch[21:]`` (attributes to end) equals ``header.crc``."""
    return crc32c.crc32c(batch[ATTRIBUTES_OFFSET:]) == header.crc


def iter_batches(
    buf: bytes | bytearray | memoryview, verify_crc: bool = True
) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Yield ``(header, batch bytes)`` for each complete batch of ``buf`` in order.

    Args:
        buf: concatenated v2 batches (a produce request's records, a segment slice).
        verify_crc: check each batch's CRC32C before yielding it.

    Raises:
        CorruptRecordError: bad magic, impossible length, a batch running past the end of
            ``buf`` (torn tail), trailing bytes too short for a header, or a CRC mismatch.
    """
    view = memoryview(buf)
    position = 0
    end = len(view)
    while position < end:
        header = parse_header(view, position)
        batch_end = position + header.size_in_bytes
        if batch_end > end:
            raise CorruptRecordError(
                f"batch at position {position} needs {header.size_in_bytes} bytes, "
                f"only {end - position} remain"
            )
        batch = view[position:batch_end]
        if verify_crc and not crc_matches(header, batch):
            raise CorruptRecordError(
                f"CRC32C mismatch in batch at position {position} "
                f"(base offset {header.base_offset})"
            )
        yield header, batch
        position = batch_end


def valid_prefix_length(buf: bytes | bytearray | memoryview) -> int:
    """Return how many leading bytes of ``buf`` are complete batches with a valid CRC.

    Used by recovery (Kafka's documentation, "Implementation: Log", Guarantees: on
    startup the last segment is checked and a partial or corrupt tail is cut; Kafka's
    ``LogSegment.recover``): the log is truncated to this
    length, dropping a torn or corrupt tail. Never raises for bad data.
    """
    view = memoryview(buf)
    position = 0
    end = len(view)
    while position < end:
        try:
            header = parse_header(view, position)
        except CorruptRecordError:
            break
        batch_end = position + header.size_in_bytes
        if batch_end > end or not crc_matches(header, view[position:batch_end]):
            break
        position = batch_end
    return position


def set_max_timestamp(
    batch: bytearray | memoryview, header: BatchHeader, log_append_time: bool, max_timestamp: int
) -> BatchHeader:
    """Stamp a batch's timestamp type and ``maxTimestamp`` in place and recompute its CRC.

    Kafka's ``DefaultRecordBatch.setMaxTimestamp``: the leader sets the batch's maximum
    to the largest record timestamp (CreateTime) or to its clock (LogAppendTime). A batch
    that already carries both values is left untouched.

    Args:
        batch: the writable bytes of exactly one batch.
        header: the batch's current header.
        log_append_time: set (True) or clear (False) the LogAppendTime attribute bit.
        max_timestamp: the new ``maxTimestamp``, ms.

    Returns:
        The header with the new ``attributes``, ``max_timestamp`` and ``crc``.
    """
    attributes = header.attributes & ~TIMESTAMP_TYPE_MASK
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_MASK
    if attributes == header.attributes and max_timestamp == header.max_timestamp:
        return header
    _INT16.pack_into(batch, ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(batch, MAX_TIMESTAMP_OFFSET, max_timestamp)
    crc = crc32c.crc32c(batch[ATTRIBUTES_OFFSET:])
    _UINT32.pack_into(batch, CRC_OFFSET, crc)
    return dataclasses.replace(header, attributes=attributes, max_timestamp=max_timestamp, crc=crc)


def assign_offsets(
    buf: bytes | bytearray | memoryview,
    base_offset: int,
    partition_leader_epoch: int,
    verify_crc: bool = True,
) -> tuple[bytes, tuple[BatchHeader, ...]]:
    """Return a copy of ``buf`` with offsets assigned from ``base_offset`` and the epoch set.

    Each batch's ``baseOffset`` becomes the next free offset (the previous batch's
    ``next_offset``) and its ``partitionLeaderEpoch`` is stamped; the CRC does not cover
    either field so it stays valid (Kafka's in-place assignment in ``LogValidator``).

    Args:
        buf: concatenated v2 batches as sent by a producer.
        base_offset: offset given to the first record (the log end offset).
        partition_leader_epoch: the leader epoch the leader appends in.
        verify_crc: check CRCs while walking (skip when already validated).

    Returns:
        The rewritten bytes and the rewritten headers, one per batch.

    Raises:
        CorruptRecordError: as ``iter_batches``.
    """
    out = bytearray(buf)
    headers: list[BatchHeader] = []
    position = 0
    next_offset = base_offset
    for header, batch in iter_batches(buf, verify_crc):
        _BASE_OFFSET.pack_into(out, position, next_offset)
        _INT32.pack_into(out, position + PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)
        new_header = dataclasses.replace(
            header, base_offset=next_offset, partition_leader_epoch=partition_leader_epoch
        )
        headers.append(new_header)
        next_offset = new_header.next_offset
        position += len(batch)
    return bytes(out), tuple(headers)


def record_timestamps(batch: bytes | bytearray | memoryview) -> Iterator[tuple[int, int]]:
    """Yield ``(offset, timestamp ms)`` of every record in one batch, decompressing it.

    Uses kafka-python's ``DefaultRecordBatch`` reader; with LogAppendTime every record
    carries the batch's ``maxTimestamp``.

    Raises:
        CorruptRecordError: the records section cannot be decoded.
        UnsupportedCompressionTypeError: the codec's library is not installed.
    """
    try:
        for record in DefaultRecordBatch(bytes(batch)):
            yield record.offset, record.timestamp
    except KafkaPythonCorruptRecordError as exc:
        raise CorruptRecordError(str(exc)) from exc
    except UnsupportedCodecError as exc:
        raise UnsupportedCompressionTypeError(str(exc)) from exc


def find_timestamp_in_batch(
    batch: bytes | bytearray | memoryview, target_timestamp: int, min_offset: int
) -> tuple[int, int] | None:
    """Return ``(offset, timestamp)`` of the first record with ``timestamp >= target``.

    Records below ``min_offset`` (the log start offset) are skipped. None if no record
    of the batch qualifies. Raises as ``record_timestamps``.
    """
    for offset, timestamp in record_timestamps(batch):
        if timestamp >= target_timestamp and offset >= min_offset:
            return offset, timestamp
    return None
