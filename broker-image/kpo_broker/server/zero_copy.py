"""Zero-copy Fetch responses: record data goes from segment files to the socket with ``sendfile``.

kafka-python encodes the response; each partition's ``records`` field is first encoded
as a unique placeholder token, whose position in the encoded bytes is then found and
replaced by the real length prefix and the file slices (Kafka's ``FileRecords`` sent
with ``transferTo``). The length prefix is an int32 for non-flexible versions and an
unsigned varint of length + 1 for flexible ones (KIP-482). If a token cannot be found
exactly once, the records are read into memory instead, so the response is always
correct.
"""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kpo_broker.log.filerecords import FileSlice

_TOKEN_PREFIX = b"\x00KPO-ZC\x00"
_TOKEN_SIZE = 16


@dataclass
class ZeroCopyResponse:
    """A response message plus the file slices its ``records`` placeholders stand for.

    Attributes:
        message: the kafka-python response message (records fields hold tokens).
        splices: token -> the file slices to send in its place.
    """

    message: Any
    splices: dict[bytes, Sequence[FileSlice]] = field(default_factory=dict)

    def placeholder(self, slices: Sequence[FileSlice]) -> bytes:
        """Register ``slices`` and return the unique token to put in a ``records`` field."""
        token = _TOKEN_PREFIX + struct.pack(">q", len(self.splices) + (os.getpid() << 20))
        assert len(token) == _TOKEN_SIZE
        self.splices[token] = slices
        return token


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


#: A part of a framed response: bytes to write, or a file slice to ``sendfile``.
Part = bytes | FileSlice


def assemble(
    framed: bytes, splices: dict[bytes, Sequence[FileSlice]], flexible: bool
) -> list[Part]:
    """Replace each token in ``framed`` (a size-prefixed response) by its file slices.

    Returns:
        The parts in order; the leading 4-byte frame size is corrected for the real sizes.
    """
    parts: list[Part] = []
    cursor = 4
    total = len(framed) - 4
    positions = []
    for token, slices in splices.items():
        at = framed.find(token)
        if at < 0 or framed.find(token, at + 1) >= 0:
            raise ValueError("placeholder token not found exactly once")
        positions.append((at, token, slices))
    positions.sort()
    for at, _token, slices in positions:
        size = sum(s.size for s in slices)
        if flexible:
            prefix_old = _uvarint(_TOKEN_SIZE + 1)
            prefix_new = _uvarint(size + 1)
        else:
            prefix_old = struct.pack(">i", _TOKEN_SIZE)
            prefix_new = struct.pack(">i", size)
        start = at - len(prefix_old)
        if framed[start:at] != prefix_old:
            raise ValueError("unexpected length prefix before a placeholder")
        parts.append(framed[cursor:start] + prefix_new)
        parts.extend(s for s in slices if s.size)
        cursor = at + _TOKEN_SIZE
        total += len(prefix_new) - len(prefix_old) + size - _TOKEN_SIZE
    parts.append(framed[cursor:])
    return [struct.pack(">i", total), *parts]


def inline(framed: bytes, splices: dict[bytes, Sequence[FileSlice]], flexible: bool) -> bytes:
    """Like :func:`assemble` but reading the slices into memory (the fallback path)."""
    out = bytearray()
    for part in assemble(framed, splices, flexible):
        out += part if isinstance(part, bytes) else part.read_bytes()
    return bytes(out)


async def write_parts(writer: asyncio.StreamWriter, parts: list[Part]) -> None:
    """Write bytes parts and ``sendfile`` the slices, in order."""
    loop = asyncio.get_running_loop()
    pending = bytearray()
    for part in parts:
        if isinstance(part, bytes):
            pending += part
            continue
        if pending:
            writer.write(bytes(pending))
            pending.clear()
        await writer.drain()
        file = part.open_file()  # held until the transfer is done
        await loop.sendfile(writer.transport, file, part.position, part.size)
    if pending:
        writer.write(bytes(pending))
    await writer.drain()


#: Bytes read from a segment file per write on the copying path (TLS), 64 KiB.
COPY_CHUNK_BYTES = 65536


async def write_parts_copied(
    writer: asyncio.StreamWriter,
    framed: bytes,
    splices: dict[bytes, Sequence[FileSlice]],
    flexible: bool,
) -> None:
    """Write a response whose slices are read and written in chunks (no ``sendfile``).

    Used on TLS connections, where the kernel cannot send file data itself: each slice
    is read :data:`COPY_CHUNK_BYTES` at a time and written through the transport, so a
    large Fetch response is never held in memory whole.
    """
    try:
        parts = assemble(framed, splices, flexible)
    except ValueError:
        parts = [inline(framed, splices, flexible)]
    for part in parts:
        if isinstance(part, bytes):
            writer.write(part)
            continue
        file = part.open_file()
        position, remaining = part.position, part.size
        while remaining > 0:
            chunk = os.pread(file.fileno(), min(COPY_CHUNK_BYTES, remaining), position)
            if not chunk:
                raise OSError(f"segment file ended {remaining} bytes early")
            writer.write(chunk)
            position += len(chunk)
            remaining -= len(chunk)
            await writer.drain()
    await writer.drain()
