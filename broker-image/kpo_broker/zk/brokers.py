"""Broker registration, broker id generation and the cluster id (``/brokers``, ``/cluster``)."""

from __future__ import annotations

import time
from typing import Any

from kazoo.exceptions import NodeExistsError, NoNodeError, ZookeeperError

from kpo_broker.zk import paths
from kpo_broker.zk.data import (
    decode_broker_registration,
    decode_cluster_id,
    encode_broker_registration,
    encode_cluster_id,
)
from kpo_broker.zk.errors import BrokerIdAlreadyRegisteredError, ZkOperationError
from kpo_broker.zk.model import BrokerRegistration
from kpo_broker.zk.session import ZkSession


def now_ms() -> int:
    """Return the wall-clock time in ms since the epoch (the ``timestamp`` fields)."""
    return time.time_ns() // 1_000_000


def _fail(path: str, result: object) -> ZkOperationError:
    return ZkOperationError(path, type(result).__name__)


class BrokerZk(ZkSession):
    """Broker-side operations on ``/brokers/ids``, ``/brokers/seqid`` and ``/cluster/id``."""

    def register_broker(self, registration: BrokerRegistration) -> int:
        """Create the ephemeral ``/brokers/ids/<id>`` znode of this broker.

        Returns:
            the broker epoch: the znode's czxid (KIP-380), as Kafka does.

        Raises:
            BrokerIdAlreadyRegisteredError: another session holds this broker id.
            ZkConnectionLossError: the session failed.
        """
        path = paths.broker_path(registration.id)
        data = encode_broker_registration(registration, now_ms())
        result = self._call("create_async", path, data, ephemeral=True, include_data=True)
        if isinstance(result, NodeExistsError):
            # Our own znode (a retried create within the same session) is a success.
            stat: Any = self._call("exists_async", path)
            if (
                stat is not None
                and not isinstance(stat, ZookeeperError)
                and stat.ephemeralOwner == self._zk.client_id[0]
            ):
                return int(stat.czxid)
            raise BrokerIdAlreadyRegisteredError(
                f"broker.id {registration.id} is already registered at {path}"
            )
        if isinstance(result, ZookeeperError):
            raise _fail(path, result)
        _, created = result
        return int(created.czxid)

    def get_live_broker_ids(self) -> list[int]:
        """Return the ids of the registered (live) brokers, sorted.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        result = self._call("get_children_async", paths.BROKER_IDS)
        if isinstance(result, NoNodeError):
            return []
        if isinstance(result, ZookeeperError) or not isinstance(result, list):
            raise _fail(paths.BROKER_IDS, result)
        return sorted(int(child) for child in result if child.isdigit())

    def get_live_brokers(self) -> dict[int, BrokerRegistration]:
        """Return broker id -> registration (with its epoch) of every live broker.

        The registrations are read pipelined; brokers that vanish meanwhile are left out.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: a registration is not Kafka's format.
        """
        ids = self.get_live_broker_ids()
        requests = [self._request("get_async", path) for path in map(paths.broker_path, ids)]
        brokers: dict[int, BrokerRegistration] = {}
        for broker_id, result in zip(ids, self._run(requests), strict=True):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, ZookeeperError):
                raise _fail(paths.broker_path(broker_id), result)
            data, stat = result
            brokers[broker_id] = decode_broker_registration(broker_id, data, stat.czxid)
        return brokers

    def get_broker(self, broker_id: int) -> BrokerRegistration | None:
        """Return one live broker's registration, or None when it is not registered.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: the registration is not Kafka's format.
        """
        path = paths.broker_path(broker_id)
        result = self._call("get_async", path)
        if isinstance(result, NoNodeError):
            return None
        if isinstance(result, ZookeeperError):
            raise _fail(path, result)
        data, stat = result
        return decode_broker_registration(broker_id, data, stat.czxid)

    def generate_broker_sequence_id(self) -> int:
        """Return a new cluster-unique sequence number: the new version of ``/brokers/seqid``.

        Kafka adds ``reserved.broker.max.id`` to it to generate a ``broker.id``
        (``broker.id.generation.enable``).

        Raises:
            ZkConnectionLossError: the session failed.
        """
        path = paths.BROKER_SEQUENCE_ID
        result = self._call("set_async", path, b"", -1)
        if isinstance(result, NoNodeError):
            self._ensure_paths([path])
            result = self._call("set_async", path, b"", -1)
        if isinstance(result, ZookeeperError):
            raise _fail(path, result)
        return int(result.version)

    def get_cluster_id(self) -> str | None:
        """Return the cluster id from ``/cluster/id``, or None when none was created yet.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: the znode is not Kafka's format.
        """
        result = self._call("get_async", paths.CLUSTER_ID)
        if isinstance(result, NoNodeError):
            return None
        if isinstance(result, ZookeeperError):
            raise _fail(paths.CLUSTER_ID, result)
        data, _ = result
        return decode_cluster_id(data)

    def get_or_create_cluster_id(self, proposed_id: str) -> str:
        """Return the cluster id, creating ``/cluster/id`` with ``proposed_id`` if it is missing.

        Only the first broker's proposal is kept (Kafka's ``getOrGenerateClusterId``);
        Kafka proposes a URL-safe base64 UUID.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        existing = self.get_cluster_id()
        if existing is not None:
            return existing
        path, data = paths.CLUSTER_ID, encode_cluster_id(proposed_id)
        result = self._call("create_async", path, data, makepath=True)
        if isinstance(result, NodeExistsError):
            created = self.get_cluster_id()
            if created is not None:
                return created
        if isinstance(result, ZookeeperError):
            raise _fail(path, result)
        return proposed_id
