"""Producer id blocks claimed through ``/latest_producer_id_block`` on real ZooKeeper."""

import asyncio
import json
import threading
from collections.abc import Callable

import pytest
from kazoo.client import KazooClient

from kpo_broker.server.producer_ids import ProducerIdManager
from kpo_broker.zk.client import KafkaZkClient
from kpo_broker.zk.errors import MalformedZNodeDataError
from kpo_broker.zk.producer_ids import ProducerIdBlock
from tests.integration.broker.zk.conftest import SESSION_TIMEOUT_MS

pytestmark = pytest.mark.integration

PATH = "/latest_producer_id_block"


def raw_client(zk_connect: str) -> KazooClient:
    """A plain kazoo client rooted at the test's chroot."""
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=15)
    return client


def test_first_claim_writes_kafkas_document(zk_connect: str, zk_client: KafkaZkClient) -> None:
    # connect() created the znode empty, as Kafka's brokers do at start-up.
    assert zk_client.get_latest_producer_id_block() == (None, 0)
    block = zk_client.claim_producer_id_block(broker_id=3)
    assert block == ProducerIdBlock(3, 0, 1000)
    raw = raw_client(zk_connect)
    try:
        data, stat = raw.get(PATH)
    finally:
        raw.stop()
        raw.close()
    assert json.loads(data) == {
        "version": 1,
        "broker": 3,
        "block_start": "0",
        "block_end": "999",
    }
    assert zk_client.get_latest_producer_id_block() == (block, stat.version)


def test_two_brokers_claim_disjoint_consecutive_blocks(
    new_client: Callable[..., KafkaZkClient],
) -> None:
    first, second = new_client(), new_client()
    claims = [
        first.claim_producer_id_block(1),
        second.claim_producer_id_block(2),
        first.claim_producer_id_block(1),
        second.claim_producer_id_block(2),
    ]
    assert [(b.broker_id, b.first_producer_id, b.last_producer_id) for b in claims] == [
        (1, 0, 999),
        (2, 1000, 1999),
        (1, 2000, 2999),
        (2, 3000, 3999),
    ]
    latest, _ = first.get_latest_producer_id_block()
    assert latest == claims[-1]


def test_concurrent_claims_never_overlap(new_client: Callable[..., KafkaZkClient]) -> None:
    clients = [new_client() for _ in range(3)]
    claimed: list[ProducerIdBlock] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def claim_many(client: KafkaZkClient, broker_id: int) -> None:
        try:
            for _ in range(8):
                block = client.claim_producer_id_block(broker_id)
                with lock:
                    claimed.append(block)
        except BaseException as exc:  # reported below, on the test's thread
            errors.append(exc)

    threads = [
        threading.Thread(target=claim_many, args=(client, broker_id))
        for broker_id, client in enumerate(clients)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    starts = sorted(block.first_producer_id for block in claimed)
    assert starts == [1000 * i for i in range(24)]
    assert {block.broker_id for block in claimed} == {0, 1, 2}


def test_two_producer_id_managers_hand_out_disjoint_ids(
    new_client: Callable[..., KafkaZkClient],
) -> None:
    managers = [ProducerIdManager(1, new_client()), ProducerIdManager(2, new_client())]

    async def scenario() -> list[list[int]]:
        handed: list[list[int]] = [[], []]
        for _ in range(1500):  # crosses block boundaries on both brokers
            for index, manager in enumerate(managers):
                handed[index].append(await manager.generate_producer_id())
        return handed

    first, second = asyncio.run(scenario())
    assert len(set(first) | set(second)) == 3000
    assert first[:2] == [0, 1] and second[:2] == [1000, 1001]
    assert first[1000] == 2000 and second[1000] == 3000  # each claimed its second block
    blocks = [m.current_block for m in managers]
    assert [(b.broker_id, b.first_producer_id) for b in blocks if b] == [(1, 2000), (2, 3000)]


class RacedClient(KafkaZkClient):
    """Lets a rival broker claim a block right after this client's first read."""

    def __init__(self, connect: str, rival: KafkaZkClient) -> None:
        super().__init__(connect, session_timeout_ms=SESSION_TIMEOUT_MS)
        self.rival = rival
        self.reads = 0

    def get_latest_producer_id_block(self) -> tuple[ProducerIdBlock | None, int | None]:
        read = super().get_latest_producer_id_block()
        self.reads += 1
        if self.reads == 1:
            self.rival.claim_producer_id_block(broker_id=9)
        return read


def test_lost_compare_and_set_is_retried(zk_connect: str, zk_client: KafkaZkClient) -> None:
    zk_client.claim_producer_id_block(broker_id=9)  # 0-999
    raced = RacedClient(zk_connect, rival=zk_client)
    raced.connect()
    try:
        block = raced.claim_producer_id_block(broker_id=5)
    finally:
        raced.close()
    # The first attempt computed 1000-1999 but the rival took it; the retry re-read.
    assert raced.reads == 2
    assert block == ProducerIdBlock(5, 2000, 1000)
    assert zk_client.get_latest_producer_id_block()[0] == block


def test_missing_znode_is_created_and_racing_creates_retry(
    zk_connect: str, zk_client: KafkaZkClient
) -> None:
    raw = raw_client(zk_connect)
    try:
        raw.delete(PATH)
        assert zk_client.get_latest_producer_id_block() == (None, None)
        assert zk_client.claim_producer_id_block(4) == ProducerIdBlock(4, 0, 1000)
        raw.delete(PATH)
    finally:
        raw.stop()
        raw.close()
    # A rival creates the znode between this client's read and its create.
    raced = RacedClient(zk_connect, rival=zk_client)
    raced.connect()
    try:
        raw = raw_client(zk_connect)
        raw.delete(PATH)  # connect() re-created it empty; make it missing again
        raw.stop()
        raw.close()
        block = raced.claim_producer_id_block(broker_id=5)
    finally:
        raced.close()
    assert raced.reads == 2
    assert block == ProducerIdBlock(5, 1000, 1000)


def test_malformed_znode_is_reported(zk_connect: str, zk_client: KafkaZkClient) -> None:
    raw = raw_client(zk_connect)
    try:
        raw.set(PATH, b'{"version":1,"broker":0}')
    finally:
        raw.stop()
        raw.close()
    with pytest.raises(MalformedZNodeDataError):
        zk_client.claim_producer_id_block(1)
