"""The ``/latest_producer_id_block`` JSON codec and block arithmetic (pure)."""

import pytest

from kpo_broker.zk.errors import MalformedZNodeDataError
from kpo_broker.zk.producer_ids import (
    MAX_PRODUCER_ID,
    ProducerIdBlock,
    ProducerIdsExhaustedError,
    decode_producer_id_block,
    encode_producer_id_block,
    next_producer_id_block,
)


def test_block_is_kafkas_version_1_document() -> None:
    block = ProducerIdBlock(broker_id=2, first_producer_id=3000, size=1000)
    assert block.last_producer_id == 3999 and block.next_block_first_id == 4000
    assert encode_producer_id_block(block) == (
        b'{"version":1,"broker":2,"block_start":"3000","block_end":"3999"}'
    )
    assert decode_producer_id_block(encode_producer_id_block(block)) == block


def test_decode_kafka_written_block() -> None:
    data = b'{"version":1,"broker":0,"block_start":"0","block_end":"999"}'
    assert decode_producer_id_block(data) == ProducerIdBlock(0, 0, 1000)


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"[]",
        b'{"version":1,"block_start":"0","block_end":"999"}',
        b'{"version":1,"broker":0,"block_start":0,"block_end":"999"}',
        b'{"version":1,"broker":0,"block_start":"-5","block_end":"999"}',
        b'{"version":1,"broker":0,"block_start":"10","block_end":"9"}',
        b'{"version":1,"broker":"0","block_start":"0","block_end":"9"}',
    ],
)
def test_malformed_blocks_are_refused(data: bytes) -> None:
    with pytest.raises(MalformedZNodeDataError):
        decode_producer_id_block(data)


def test_next_block_follows_the_latest() -> None:
    assert next_producer_id_block(None, 4) == ProducerIdBlock(4, 0, 1000)
    assert next_producer_id_block(ProducerIdBlock(1, 0, 1000), 4) == ProducerIdBlock(4, 1000, 1000)
    assert next_producer_id_block(ProducerIdBlock(1, 50, 10), 4, size=5).first_producer_id == 60


def test_exhausted_producer_ids() -> None:
    last = ProducerIdBlock(1, MAX_PRODUCER_ID - 1999, 1000)
    assert next_producer_id_block(last, 1).last_producer_id == MAX_PRODUCER_ID
    with pytest.raises(ProducerIdsExhaustedError):
        next_producer_id_block(ProducerIdBlock(1, MAX_PRODUCER_ID - 999, 1000), 1)
    with pytest.raises(ValueError):
        ProducerIdBlock(1, 0, 0)
