"""ZooKeeper's multiRead request in jute encoding, checked against the wire format.

The expected bytes are built by hand from ZooKeeper's ``MultiOperationRecord`` and
``MultiResponse`` (``zookeeper.jute``): ``MultiHeader`` = int type, bool done, int err.
"""

from __future__ import annotations

import struct

import pytest
from kazoo.exceptions import MarshallingError, NoAuthError, NoNodeError, UnimplementedError

from kpo_broker.zk.multi_read import (
    GET_CHILDREN_TYPE,
    MAX_MULTI_READ_OPS,
    MULTI_READ_TYPE,
    MultiRead,
    chunk,
    is_unsupported,
)


def header(op_type: int, done: bool, err: int) -> bytes:
    return struct.pack("!iBi", op_type, 1 if done else 0, err)


def string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack("!i", len(raw)) + raw


STAT = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)


def stat_bytes() -> bytes:
    return struct.pack("!qqqqiiiqiiq", *STAT)


def test_the_request_is_multi_read_with_one_get_data_per_znode() -> None:
    request = MultiRead(("/kafka/a", "/kafka/b"))
    assert request.type == MULTI_READ_TYPE == 22
    assert bytes(request.serialize()) == (
        header(4, False, -1)
        + string("/kafka/a")
        + b"\x00"
        + header(4, False, -1)
        + string("/kafka/b")
        + b"\x00"
        + header(-1, True, -1)
    )


def test_get_children_operations_use_their_op_code() -> None:
    request = MultiRead(("/a",), GET_CHILDREN_TYPE)
    assert bytes(request.serialize()).startswith(header(8, False, -1))


def test_the_answer_gives_data_and_stat_or_each_reads_own_error() -> None:
    answer = (
        header(4, False, 0)
        + struct.pack("!i", 3)
        + b"abc"
        + stat_bytes()
        + header(-1, False, NoNodeError.code)
        + struct.pack("!i", NoNodeError.code)
        + header(4, False, 0)
        + struct.pack("!i", -1)  # null data
        + stat_bytes()
        + header(-1, False, NoAuthError.code)
        + struct.pack("!i", NoAuthError.code)
        + header(-1, True, -1)
    )
    results = MultiRead(("/a", "/b", "/c", "/d")).deserialize(b"pad" + answer, 3)
    data, stat = results[0]
    assert data == b"abc"
    assert tuple(stat) == STAT
    assert isinstance(results[1], NoNodeError)
    assert results[2][0] is None
    assert isinstance(results[3], NoAuthError)


def test_the_answer_to_get_children_lists_names() -> None:
    answer = (
        header(8, False, 0)
        + struct.pack("!i", 2)
        + string("x")
        + string("y")
        + header(-1, True, -1)
    )
    assert MultiRead(("/a",), GET_CHILDREN_TYPE).deserialize(answer, 0) == [["x", "y"]]


def test_an_answer_with_the_wrong_count_is_refused() -> None:
    answer = header(-1, False, -101) + struct.pack("!i", -101) + header(-1, True, -1)
    with pytest.raises(MarshallingError, match="2 znodes answered 1"):
        MultiRead(("/a", "/b")).deserialize(answer, 0)


def test_a_truncated_answer_is_a_marshalling_error() -> None:
    with pytest.raises(MarshallingError):
        MultiRead(("/a",)).deserialize(header(4, False, 0) + b"\x00\x00", 0)


def test_an_unknown_op_type_in_the_answer_is_refused() -> None:
    with pytest.raises(MarshallingError, match="op type 5"):
        MultiRead(("/a",)).deserialize(header(5, False, 0), 0)


def test_chunks_are_consecutive_runs_of_at_most_the_size() -> None:
    items = [str(i) for i in range(250)]
    parts = chunk(items)
    assert [len(p) for p in parts] == [MAX_MULTI_READ_OPS, MAX_MULTI_READ_OPS, 50]
    assert [i for p in parts for i in p] == items
    assert chunk([]) == []
    with pytest.raises(ValueError):
        chunk(items, 0)


def test_servers_without_multi_read_are_recognised() -> None:
    assert is_unsupported(UnimplementedError())
    assert is_unsupported(MarshallingError())
    assert not is_unsupported(NoNodeError())
    assert not is_unsupported(ValueError())
