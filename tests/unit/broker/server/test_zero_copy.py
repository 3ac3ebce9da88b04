"""Zero-copy Fetch responses decode exactly like in-memory ones (kafka-python's parser)."""

from pathlib import Path

import pytest
from kafka.protocol.consumer import FetchResponse

from kpo_broker.log.filerecords import FileRecords, FileSlice
from kpo_broker.server import zero_copy
from kpo_broker.server.zero_copy import ZeroCopyResponse

_Topic = FetchResponse.FetchableTopicResponse
_Partition = _Topic.PartitionData


def _partition(index: int, records: bytes) -> object:
    return _Partition(
        partition_index=index,
        error_code=0,
        high_watermark=10,
        last_stable_offset=10,
        log_start_offset=0,
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=records,
    )


@pytest.mark.parametrize("version", [4, 11, 12])
def test_spliced_response_decodes_to_the_file_bytes(tmp_path: Path, version: int) -> None:
    data = tmp_path / "segment.log"
    data.write_bytes(b"A" * 100 + b"B" * 300 + b"C" * 5)
    segment = FileRecords(data)
    try:
        response = ZeroCopyResponse(None)
        first = response.placeholder([FileSlice(segment, 0, 100)])
        second = response.placeholder([FileSlice(segment, 100, 300), FileSlice(segment, 400, 5)])
        response.message = FetchResponse(
            throttle_time_ms=0,
            error_code=0,
            session_id=0,
            responses=[
                _Topic(
                    topic="t",
                    partitions=[
                        _partition(0, first),
                        _partition(1, b""),
                        _partition(2, second),
                    ],
                )
            ],
        )
        framed = bytes(response.message.encode(version=version, framed=True))
        flexible = version >= 12
        parts = zero_copy.assemble(framed, response.splices, flexible)
        assert any(isinstance(p, FileSlice) for p in parts)
        out = zero_copy.inline(framed, response.splices, flexible)
    finally:
        segment.close()
    assert int.from_bytes(out[:4], "big") == len(out) - 4
    decoded = FetchResponse.decode(out[4:], version=version)
    records = [p.records for p in decoded.responses[0].partitions]
    assert records[0] == b"A" * 100
    assert records[1] in (b"", None)
    assert records[2] == b"B" * 300 + b"C" * 5


def test_a_token_missing_from_the_encoding_is_reported() -> None:
    response = ZeroCopyResponse(None)
    response.placeholder([])
    with pytest.raises(ValueError):
        zero_copy.assemble(b"\x00\x00\x00\x00", response.splices, False)
