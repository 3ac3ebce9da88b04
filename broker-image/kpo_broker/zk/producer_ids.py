"""Producer id blocks: ``/latest_producer_id_block`` (idempotent producers, KIP-98).

Brokers hand out producer ids (InitProducerId) from blocks of 1000 consecutive ids they
claim in ZooKeeper, so ids are unique in the cluster without a round trip per producer.
The znode holds the block claimed last, as Kafka's ZooKeeper-mode brokers write it::

    {"version":1,"broker":2,"block_start":"3000","block_end":"3999"}

(``block_start``/``block_end`` are decimal strings, ``block_end`` inclusive). A broker
claims the block after it with a compare-and-set on the znode version and retries when
another broker won the race (Kafka's ``ZkProducerIdManager.getNewProducerIdBlock``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kazoo.exceptions import NodeExistsError, NoNodeError, ZookeeperError

from kpo_broker.zk import paths
from kpo_broker.zk._json import as_int, as_str, dump, load_object, required
from kpo_broker.zk.errors import KafkaZkError, MalformedZNodeDataError, ZkOperationError
from kpo_broker.zk.session import ZkSession

#: Ids per block (Kafka's ``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``).
PRODUCER_ID_BLOCK_SIZE = 1000
#: Version of the znode's JSON.
PRODUCER_ID_BLOCK_VERSION = 1
#: Producer ids are int64.
MAX_PRODUCER_ID = 2**63 - 1
#: Compare-and-set attempts before giving up (each lost attempt means another broker
#: claimed a block meanwhile, so this only trips under pathological contention).
CLAIM_ATTEMPTS = 100

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


class ProducerIdZk(ZkSession):
    """Reads and compare-and-set claims of ``/latest_producer_id_block``."""

    def get_latest_producer_id_block(self) -> tuple[ProducerIdBlock | None, int | None]:
        """Read the block claimed last and the znode version.

        Returns:
            ``(block, version)``; the block is None when the znode is empty (created at
            broker start-up, before any claim) and both are None when it is missing.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: the znode is not Kafka's format.
        """
        path = paths.LATEST_PRODUCER_ID_BLOCK
        result = self._call("get_async", path)
        if isinstance(result, NoNodeError):
            return None, None
        if isinstance(result, ZookeeperError):
            raise ZkOperationError(path, type(result).__name__)
        data, stat = result
        block = decode_producer_id_block(data) if data else None
        return block, int(stat.version)

    def claim_producer_id_block(
        self, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE
    ) -> ProducerIdBlock:
        """Claim the next block of producer ids for ``broker_id``.

        Reads the latest block and writes the one after it, conditional on the znode
        version read; when another broker wrote first, reads again and retries. A
        missing znode is created with the first block (ids from 0).

        Args:
            broker_id: the claiming broker (recorded in the znode).
            size: ids per block (Kafka always uses 1000).

        Returns:
            The claimed block; no other broker can claim an overlapping one.

        Raises:
            ProducerIdsExhaustedError: no block left in the int64 range.
            ZkConnectionLossError: the session failed (the claim may or may not have
                been written; retrying claims a fresh block, wasting at most one).
            ZkOperationError: ZooKeeper refused the write, or ``CLAIM_ATTEMPTS``
                compare-and-sets were all lost.
            MalformedZNodeDataError: the znode is not Kafka's format.
        """
        path = paths.LATEST_PRODUCER_ID_BLOCK
        for _ in range(CLAIM_ATTEMPTS):
            current, version = self.get_latest_producer_id_block()
            block = next_producer_id_block(current, broker_id, size)
            data = encode_producer_id_block(block)
            if version is None:
                created = self._call("create_async", path, data, makepath=True)
                if isinstance(created, NodeExistsError):
                    continue
                if isinstance(created, ZookeeperError):
                    raise ZkOperationError(path, type(created).__name__)
                return block
            if self._set_or_create(path, data, expected_version=version) is not None:
                return block
        raise ZkOperationError(path, f"lost {CLAIM_ATTEMPTS} compare-and-sets in a row")
