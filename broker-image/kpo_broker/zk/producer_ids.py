"""Producer id blocks: ``/latest_producer_id_block`` (idempotent producers, KIP-98).

Brokers hand out producer ids (InitProducerId) from blocks of 1000 consecutive ids they
claim in ZooKeeper, so ids are unique in the cluster without a round trip per producer.
The znode holds the block claimed last, as Kafka's ZooKeeper-mode brokers write it::

    {"version":1,"broker":2,"block_start":"3000","block_end":"3999"}

(``block_start``/``block_end`` are decimal strings, ``block_end`` inclusive). A broker
claims the block after it with a compare-and-set on the znode version and retries when
another broker won the race (Kafka's ``ZkProducerIdManager.getNewProducerIdBlock``; see
:meth:`~kpo_broker.zk.client.KafkaZkClient.claim_producer_id_block`). This module holds
the block, its JSON format and which block comes next.
"""

from __future__ import annotations

from dataclasses import dataclass

from kpo_broker.zk._json import as_int, as_str, dump, load_object, required
from kpo_broker.zk.errors import KafkaZkError, MalformedZNodeDataError

#: Ids per block (Kafka's ``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``).
PRODUCER_ID_BLOCK_SIZE = 1000
#: Version of the znode's JSON.
PRODUCER_ID_BLOCK_VERSION = 1
#: Producer ids are int64.
MAX_PRODUCER_ID = 2**63 - 1

_WHAT = "producer id block"


class ProducerIdsExhaustedError(KafkaZkError):
    """The next block would pass 2^63 - 1: every producer id has been handed out."""


@dataclass(frozen=True)
class ProducerIdBlock:
    """A block of consecutive producer ids claimed by one broker.

    Attributes:
        broker_id: the broker that claimed it.
        first_producer_id: the block's first id.
        size: how many ids it holds (at least 1).
    """

    broker_id: int
    first_producer_id: int
    size: int

    def __post_init__(self) -> None:
        if self.first_producer_id < 0 or self.size < 1:
            raise ValueError(f"invalid producer id block {self}")

    @property
    def last_producer_id(self) -> int:
        """The block's last id (inclusive)."""
        return self.first_producer_id + self.size - 1

    @property
    def next_block_first_id(self) -> int:
        """The first id of the block after this one."""
        return self.last_producer_id + 1


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    """Encode a block as Kafka's version 1 ``/latest_producer_id_block`` JSON."""
    return dump(
        {
            "version": PRODUCER_ID_BLOCK_VERSION,
            "broker": block.broker_id,
            "block_start": str(block.first_producer_id),
            "block_end": str(block.last_producer_id),
        }
    )


def _as_long(document: dict[str, object], key: str) -> int:
    text = as_str(required(document, key, _WHAT), _WHAT, key)
    if not (text.isascii() and text.isdigit()):
        raise MalformedZNodeDataError(_WHAT, f"{key} must be a decimal string, got {text!r}")
    return int(text)


def decode_producer_id_block(data: bytes) -> ProducerIdBlock:
    """Decode ``/latest_producer_id_block`` JSON.

    Raises:
        MalformedZNodeDataError: not Kafka's format, or ``block_end < block_start``.
    """
    document = load_object(data, _WHAT)
    broker_id = as_int(required(document, "broker", _WHAT), _WHAT, "broker")
    start, end = _as_long(document, "block_start"), _as_long(document, "block_end")
    if end < start:
        raise MalformedZNodeDataError(_WHAT, f"block_end {end} is below block_start {start}")
    return ProducerIdBlock(broker_id, start, end - start + 1)


def next_producer_id_block(
    current: ProducerIdBlock | None, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE
) -> ProducerIdBlock:
    """Return the block following ``current`` (the first block, from 0, when None).

    Raises:
        ProducerIdsExhaustedError: the block would pass the largest int64.
    """
    first = 0 if current is None else current.next_block_first_id
    if first > MAX_PRODUCER_ID - size + 1:
        raise ProducerIdsExhaustedError(
            f"no producer id block of {size} ids left after {first - 1}"
        )
    return ProducerIdBlock(broker_id, first, size)
