"""Controller election on ``/controller`` and the controller epoch in ``/controller_epoch``.

The first broker to create the ephemeral ``/controller`` znode is the controller
(seed 001 "Controller Failover", step 1). Creating it and bumping ``/controller_epoch``
with a compare-and-set on that znode's version happen in one multi (Kafka 2.x,
``registerControllerAndIncrementControllerEpoch``), so a broker never holds
``/controller`` without having bumped the epoch: there is nothing to undo when it
loses. The new epoch's znode version is the fence of every later controller write.
"""

from __future__ import annotations

from typing import NamedTuple

from kazoo.exceptions import NodeExistsError, NoNodeError, ZookeeperError

from kpo_broker.zk import paths
from kpo_broker.zk.brokers import now_ms
from kpo_broker.zk.data import (
    decode_controller,
    decode_controller_epoch,
    encode_controller,
    encode_controller_epoch,
)
from kpo_broker.zk.errors import ControllerMovedError, ZkOperationError
from kpo_broker.zk.ops import CreateOp, DeleteOp, SetDataOp, multi_error
from kpo_broker.zk.session import ZkSession

#: Value of ``/controller_epoch`` when the first broker creates it (Kafka's
#: ``InitialControllerEpoch``); the first controller's epoch is therefore 1.
INITIAL_CONTROLLER_EPOCH = 0
#: Elections retried after losing the epoch compare-and-set while nobody holds ``/controller``.
_ELECTION_ATTEMPTS = 3


class ControllerEpoch(NamedTuple):
    """A controller epoch and the version of the ``/controller_epoch`` znode holding it.

    Attributes:
        epoch: the controller epoch (bumped at each election).
        zk_version: the znode version; controller writes check it to be fenced.
    """

    epoch: int
    zk_version: int


class ControllerZk(ZkSession):
    """Controller election and controller epoch reads."""

    def get_controller_id(self) -> int | None:
        """Return the broker id of the active controller, or None when there is none.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: ``/controller`` is not Kafka's format.
        """
        result = self._call("get_async", paths.CONTROLLER)
        if isinstance(result, NoNodeError):
            return None
        if isinstance(result, ZookeeperError):
            raise ZkOperationError(paths.CONTROLLER, type(result).__name__)
        return decode_controller(result[0])

    def get_controller_epoch(self) -> ControllerEpoch | None:
        """Return the controller epoch and its znode version, or None before the first election.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: ``/controller_epoch`` is not a number.
        """
        path = paths.CONTROLLER_EPOCH
        result = self._call("get_async", path)
        if isinstance(result, NoNodeError):
            return None
        if isinstance(result, ZookeeperError):
            raise ZkOperationError(path, type(result).__name__)
        data, stat = result
        return ControllerEpoch(decode_controller_epoch(data), stat.version)

    def _current_controller_epoch(self) -> ControllerEpoch:
        current = self.get_controller_epoch()
        if current is not None:
            return current
        path, data = paths.CONTROLLER_EPOCH, encode_controller_epoch(INITIAL_CONTROLLER_EPOCH)
        result = self._call("create_async", path, data)
        if isinstance(result, ZookeeperError) and not isinstance(result, NodeExistsError):
            raise ZkOperationError(path, type(result).__name__)
        current = self.get_controller_epoch()
        if current is None:
            raise ZkOperationError(path, "vanished after creation")
        return current

    def _owns_controller(self, broker_id: int) -> bool:
        path = paths.CONTROLLER
        result = self._call("get_async", path)
        if isinstance(result, ZookeeperError):
            return False
        data, stat = result
        return bool(
            decode_controller(data) == broker_id and stat.ephemeralOwner == self._zk.client_id[0]
        )

    def try_elect_controller(self, broker_id: int) -> ControllerEpoch | None:
        """Try to become the controller: create ``/controller`` and bump the controller epoch.

        ``/controller_epoch`` is created at 0 when missing, so the first controller has
        epoch 1. When the epoch compare-and-set loses to a broker that has since gone
        (nobody holds ``/controller``), the election is retried with the new epoch.

        Returns:
            the new epoch and its znode version (the fence of this controller's writes),
            or None when another broker is (or just became) the controller.

        Raises:
            ZkConnectionLossError: the session failed; the outcome is unknown until
                :meth:`get_controller_id` is read again.
        """
        for _ in range(_ELECTION_ATTEMPTS):
            current = self._current_controller_epoch()
            new_epoch = current.epoch + 1
            results = self._multi(
                [
                    CreateOp(
                        paths.CONTROLLER, encode_controller(broker_id, now_ms()), ephemeral=True
                    ),
                    SetDataOp(
                        paths.CONTROLLER_EPOCH,
                        encode_controller_epoch(new_epoch),
                        current.zk_version,
                    ),
                ]
            )
            error = multi_error(results)
            if error is None:
                return ControllerEpoch(new_epoch, results[1].version)
            if self._owns_controller(broker_id):
                # A retried election of ours already won (after a lost response).
                return self._current_controller_epoch()
            if isinstance(error, NodeExistsError) or self.get_controller_id() is not None:
                return None
        return None

    def resign_controller(self, controller_epoch_zk_version: int) -> bool:
        """Delete ``/controller`` if this controller's epoch is still current.

        Returns:
            True when deleted; False when the epoch moved on or nobody was controller.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        try:
            results = self._multi([DeleteOp(paths.CONTROLLER)], controller_epoch_zk_version)
        except ControllerMovedError:
            return False
        return multi_error(results) is None
