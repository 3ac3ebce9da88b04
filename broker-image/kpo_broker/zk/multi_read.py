"""ZooKeeper's ``multiRead`` request (ZooKeeper 3.6+, ZOOKEEPER-3220) for kazoo.

One ``multiRead`` carries many ``getData`` (or ``getChildren``) operations and ZooKeeper
answers each one on its own: a missing znode fails only its own operation, unlike a
``multi`` transaction. Kafka's controller reads each znode with its own pipelined
request (``KafkaZkClient.getTopicPartitionStatesRaw``); a JVM sends 100K of those in
seconds, but through kazoo each request costs several thread hand-offs under Python's
GIL (the caller wakes kazoo's connection thread, which wakes the caller back), and a
broker's other threads keep the GIL busy, so a read costs milliseconds. Reading a
hundred znodes per request removes almost all of that; the reads are the same znodes
with the same results.

Kazoo 2.x has no ``multiRead``. :class:`MultiRead` is a request kazoo's connection sends
like its own (it has kazoo's request interface: ``type``, ``serialize``,
``deserialize``), in ZooKeeper's wire format (``MultiOperationRecord`` and
``MultiResponse`` of ``org.apache.zookeeper``): per operation a ``MultiHeader`` (op
type, done, error) followed by a ``GetDataRequest`` or ``GetChildrenRequest``
(path, watch = false), closed by a header with done set; the answer has per operation
a header (type -1 with the error code on failure) followed by a ``GetDataResponse``
(data, stat), a ``GetChildrenResponse`` or an ``ErrorResponse``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import EXCEPTIONS, MarshallingError, UnimplementedError
from kazoo.protocol.serialization import (
    MultiHeader,
    ZnodeStat,
    int_struct,
    multiheader_struct,
    read_buffer,
    read_string,
    stat_struct,
    write_string,
)

#: ZooKeeper's ``OpCode.multiRead``.
MULTI_READ_TYPE = 22
#: ZooKeeper's ``OpCode.getData``.
GET_DATA_TYPE = 4
#: ZooKeeper's ``OpCode.getChildren``.
GET_CHILDREN_TYPE = 8
#: The op type of a failed operation in a multi response (``OpCode.error``).
ERROR_TYPE = -1
#: Operations per ``multiRead``: the answer holds their data (a partition state is about
#: 200 bytes with its stat, a topic's assignment of 100 partitions a few KiB), well under
#: ZooKeeper's 1 MiB ``jute.maxbuffer``.
MAX_MULTI_READ_OPS = 100


@dataclass(frozen=True)
class MultiRead:
    """A ``multiRead`` of ``getData`` (or ``getChildren``) operations, for ``KazooClient._call``.

    Attributes:
        paths: the znodes, chroot included (the server sees full paths).
        op_type: :data:`GET_DATA_TYPE` or :data:`GET_CHILDREN_TYPE`, for every operation.
    """

    paths: tuple[str, ...]
    op_type: int = GET_DATA_TYPE

    #: The request's op code (kazoo reads ``request.type``).
    type = MULTI_READ_TYPE

    def serialize(self) -> bytearray:
        """Return the request body (``MultiOperationRecord``) in ZooKeeper's jute encoding."""
        body = bytearray()
        for path in self.paths:
            body += MultiHeader(self.op_type, False, -1).serialize()
            body += write_string(path)
            body.append(0)  # watch: false
        body += multiheader_struct.pack(-1, True, -1)
        return body

    def deserialize(self, data: bytes, offset: int) -> list[Any]:
        """Decode the answer (``MultiResponse``): one result per operation, in order.

        Returns:
            per operation: ``(data, ZnodeStat)`` for getData, a list of child names for
            getChildren, or the ``ZookeeperError`` it failed with (``NoNodeError``, ...).

        Raises:
            MarshallingError: the answer does not hold one result per operation.
        """
        try:
            results = self._decode(data, offset)
        except (struct.error, IndexError, KeyError, UnicodeDecodeError) as exc:
            raise MarshallingError(f"undecodable multiRead answer: {exc!r}") from exc
        if len(results) != len(self.paths):
            raise MarshallingError(
                f"multiRead of {len(self.paths)} znodes answered {len(results)} results"
            )
        return results

    def _decode(self, data: bytes, offset: int) -> list[Any]:
        results: list[Any] = []
        header, offset = MultiHeader.deserialize(data, offset)
        while not header.done:
            if header.type == ERROR_TYPE:
                code = int_struct.unpack_from(data, offset)[0]
                offset += int_struct.size
                results.append(EXCEPTIONS[code]())
            elif header.type == GET_DATA_TYPE:
                value, offset = read_buffer(data, offset)
                stat = ZnodeStat._make(stat_struct.unpack_from(data, offset))
                offset += stat_struct.size
                results.append((value, stat))
            elif header.type == GET_CHILDREN_TYPE:
                count = int_struct.unpack_from(data, offset)[0]
                offset += int_struct.size
                children = []
                for _ in range(max(count, 0)):
                    child, offset = read_string(data, offset)
                    children.append(child)
                results.append(children)
            else:
                raise MarshallingError(f"unexpected op type {header.type} in a multiRead answer")
            header, offset = MultiHeader.deserialize(data, offset)
        return results


def chunk(items: Sequence[str], size: int = MAX_MULTI_READ_OPS) -> list[tuple[str, ...]]:
    """Split ``items`` into consecutive runs of at most ``size``.

    Raises:
        ValueError: ``size`` is below 1.
    """
    if size < 1:
        raise ValueError(f"chunk size must be at least 1, got {size}")
    return [tuple(items[i : i + size]) for i in range(0, len(items), size)]


def is_unsupported(error: BaseException) -> bool:
    """Whether ``error`` says the server does not know ``multiRead`` (ZooKeeper before 3.6).

    Such a server answers UNIMPLEMENTED, or a reply kazoo cannot decode as a
    ``MultiResponse``.
    """
    return isinstance(error, UnimplementedError | MarshallingError)
