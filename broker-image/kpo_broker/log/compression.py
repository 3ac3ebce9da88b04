"""Bounded decompression of a v2 batch's records section (pure logic).

A compressed batch stores its records as one compressed stream after the 61-byte
header; the codec is named by attributes bits 0-2 (Kafka's ``CompressionType``: 1 gzip,
2 snappy, 3 lz4, 4 zstd). kafka-python's ``kafka.codec`` decoders inflate a whole
stream at once, so a small batch could expand to gigabytes (a "decompression bomb").
The leader instead inflates each stream incrementally and stops as soon as the output
passes ``max_bytes``, as Kafka's ``LogValidator`` only ever reads a batch through
bounded buffers. The formats are the ones Kafka's producers write:

* gzip: RFC 1952 members (several concatenated members are read in turn, as Java's
  ``GZIPInputStream`` does);
* snappy: the xerial framing of snappy-java (a 16-byte header, byte 0x82 then
  ``SNAPPY``, then blocks of ``int32 length | raw snappy``), or one raw snappy block;
* lz4: LZ4 frames (Kafka's ``KafkaLZ4BlockOutputStream``, KIP-57);
* zstd: zstd frames (KIP-110).
"""

from __future__ import annotations

import struct
import zlib

from kpo_broker.log.errors import (
    CorruptRecordError,
    RecordTooLargeError,
    UnsupportedCompressionTypeError,
)

CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
CODEC_ZSTD = 4

#: Codec id (attributes bits 0-2) -> name, as Kafka's ``CompressionType``.
CODEC_NAMES = {
    CODEC_NONE: "none",
    CODEC_GZIP: "gzip",
    CODEC_SNAPPY: "snappy",
    CODEC_LZ4: "lz4",
    CODEC_ZSTD: "zstd",
}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16
_INT32 = struct.Struct(">i")
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # gzip header and trailer, not zlib or raw deflate
_ZSTD_FEED = 64


def decompress_records(codec: int, data: bytes | memoryview, max_bytes: int) -> bytes:
    """Inflate a batch's records section, refusing output longer than ``max_bytes``.

    Args:
        codec: the batch's compression type (attributes bits 0-2); 0 returns ``data``.
        data: the bytes after the batch header.
        max_bytes: largest accepted decompressed size in bytes.

    Returns:
        The uncompressed records section.

    Raises:
        CorruptRecordError: ``codec`` names no codec (5-7), or the stream is not valid
            for its codec (bad header, bad checksum, truncated).
        UnsupportedCompressionTypeError: the codec's Python library is not installed.
        RecordTooLargeError: the stream inflates to more than ``max_bytes``.
    """
    if codec == CODEC_NONE:
        return bytes(data)
    if codec not in CODEC_NAMES:
        raise CorruptRecordError(f"attributes name compression type {codec}, which is unknown")
    name = CODEC_NAMES[codec]
    try:
        if codec == CODEC_GZIP:
            out = _gunzip(bytes(data), max_bytes)
        elif codec == CODEC_SNAPPY:
            out = _unsnappy(bytes(data), max_bytes)
        elif codec == CODEC_LZ4:
            out = _unlz4(bytes(data), max_bytes)
        else:
            out = _unzstd(bytes(data), max_bytes)
    except (CorruptRecordError, RecordTooLargeError, UnsupportedCompressionTypeError):
        raise
    except ImportError as exc:
        raise UnsupportedCompressionTypeError(
            f"the {name} codec's library is not installed: {exc}"
        ) from exc
    except Exception as exc:  # each library raises its own error type for a bad stream
        raise CorruptRecordError(f"{name} records section cannot be decompressed: {exc}") from exc
    return out


def _too_large(name: str, max_bytes: int) -> RecordTooLargeError:
    return RecordTooLargeError(
        f"{name} records section decompresses to more than {max_bytes} bytes"
    )


def _gunzip(data: bytes, max_bytes: int) -> bytes:
    out = bytearray()
    while data:
        inflater = zlib.decompressobj(_GZIP_WBITS)
        pending = data
        while not inflater.eof:
            chunk = inflater.decompress(pending, max_bytes + 1 - len(out))
            out += chunk
            if len(out) > max_bytes:
                raise _too_large("gzip", max_bytes)
            pending = inflater.unconsumed_tail
            if not chunk and not pending:
                raise CorruptRecordError("gzip records section ends before its stream does")
        data = inflater.unused_data
    return bytes(out)


def _read_uvarint(data: bytes, position: int) -> int:
    """Read the unsigned varint (at most 5 bytes) a raw snappy block starts with."""
    value = 0
    for shift in range(0, 35, 7):
        if position >= len(data):
            break
        byte = data[position]
        value |= (byte & 0x7F) << shift
        position += 1
        if not byte & 0x80:
            return value
    raise CorruptRecordError("snappy block has no valid uncompressed length")


def _unsnappy(data: bytes, max_bytes: int) -> bytes:
    import snappy

    if not data.startswith(_XERIAL_MAGIC):
        blocks = [data]
    else:
        blocks = []
        position = _XERIAL_HEADER_SIZE
        while position < len(data):
            if len(data) - position < _INT32.size:
                raise CorruptRecordError("snappy block length is truncated")
            (length,) = _INT32.unpack_from(data, position)
            position += _INT32.size
            if length < 0 or position + length > len(data):
                raise CorruptRecordError(f"snappy block of {length} bytes runs past the batch")
            blocks.append(data[position : position + length])
            position += length
    out = bytearray()
    for block in blocks:
        if len(out) + _read_uvarint(block, 0) > max_bytes:
            raise _too_large("snappy", max_bytes)
        out += snappy.decompress(block)
    return bytes(out)


def _unlz4(data: bytes, max_bytes: int) -> bytes:
    import lz4.frame

    out = bytearray()
    while data:
        decompressor = lz4.frame.LZ4FrameDecompressor()
        pending = data  # the decompressor keeps input it has not inflated yet
        while not decompressor.eof:
            chunk = decompressor.decompress(pending, max_length=max_bytes + 1 - len(out))
            if not chunk and not decompressor.eof:
                raise CorruptRecordError("lz4 records section ends before its frame does")
            out += chunk
            if len(out) > max_bytes:
                raise _too_large("lz4", max_bytes)
            pending = b""
        data = decompressor.unused_data
    return bytes(out)


def _unzstd(data: bytes, max_bytes: int) -> bytes:
    import zstandard

    # zstandard's decompressobj has no output limit, so input is fed in small pieces: one
    # piece of _ZSTD_FEED bytes inflates to at most a few MiB (zstd blocks are 128 KiB).
    out = bytearray()
    while data:
        decompressor = zstandard.ZstdDecompressor().decompressobj()
        position = 0
        while not decompressor.eof:
            if position >= len(data):
                raise CorruptRecordError("zstd records section ends before its frame does")
            out += decompressor.decompress(data[position : position + _ZSTD_FEED])
            position += _ZSTD_FEED
            if len(out) > max_bytes:
                raise _too_large("zstd", max_bytes)
        data = decompressor.unused_data + data[position:]
    return bytes(out)


#: ``compression.type`` name -> codec id (``producer`` has none: the batch keeps its own).
CODEC_OF_COMPRESSION_TYPE = {
    "uncompressed": CODEC_NONE,
    "gzip": CODEC_GZIP,
    "snappy": CODEC_SNAPPY,
    "lz4": CODEC_LZ4,
    "zstd": CODEC_ZSTD,
}


def compress_records(codec: int, data: bytes, level: int | None = None) -> bytes:
    """Compress a batch's records section with ``codec``, as Kafka's producers write it.

    The leader recompresses to the topic's ``compression.type`` (Kafka's ``LogValidator``):
    gzip as one RFC 1952 member (``level`` 1..9, -1 or None: zlib's default, as Java's
    ``Deflater.DEFAULT_COMPRESSION``); snappy in snappy-java's xerial framing (kafka-python's
    ``snappy_encode``); lz4 as an LZ4 frame with 64 KiB blocks (``level`` 1..17, KIP-57);
    zstd as one zstd frame (``level`` -131072..22, KIP-110).

    Args:
        codec: target codec id (0 returns ``data``).
        data: the uncompressed records section.
        level: the codec's level (``compression.<codec>.level``); None: the default.

    Raises:
        UnsupportedCompressionTypeError: the codec's Python library is not installed.
        CorruptRecordError: ``codec`` names no codec.
    """
    if codec == CODEC_NONE:
        return bytes(data)
    if codec not in CODEC_NAMES:
        raise CorruptRecordError(f"compression type {codec} is unknown")
    try:
        if codec == CODEC_GZIP:
            deflater = zlib.compressobj(
                zlib.Z_DEFAULT_COMPRESSION if level is None else level, zlib.DEFLATED, _GZIP_WBITS
            )
            return deflater.compress(data) + deflater.flush()
        if codec == CODEC_SNAPPY:
            from kafka.codec import snappy_encode

            return bytes(snappy_encode(data))
        if codec == CODEC_LZ4:
            import lz4.frame

            return bytes(lz4.frame.compress(data, compression_level=level or 9))
        import zstandard

        return bytes(zstandard.ZstdCompressor(level=3 if level is None else level).compress(data))
    except ImportError as exc:
        raise UnsupportedCompressionTypeError(
            f"the {CODEC_NAMES[codec]} codec's library is not installed: {exc}"
        ) from exc
