"""ISR change notifications, partition reassignment and preferred replica election znodes.

Partition leaders announce ISR changes in sequential ``/isr_change_notification``
znodes that the controller reads and deletes; admin tools queue a reassignment in
``/admin/reassign_partitions`` (seed 000 §4.1) or a preferred replica election in
``/admin/preferred_replica_election``, which the controller deletes when done.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kazoo.exceptions import NodeExistsError, NoNodeError, ZookeeperError

from kpo_broker.zk import paths
from kpo_broker.zk.data import (
    decode_isr_change_notification,
    decode_partition_reassignment,
    decode_preferred_replica_election,
    encode_isr_change_notification,
    encode_partition_reassignment,
    encode_preferred_replica_election,
)
from kpo_broker.zk.errors import (
    PreferredReplicaElectionInProgressError,
    ReassignmentInProgressError,
    ZkOperationError,
)
from kpo_broker.zk.model import TopicPartition
from kpo_broker.zk.ops import CreateOp, SetDataOp, multi_error
from kpo_broker.zk.session import ZkSession


class AdminZk(ZkSession):
    """ISR change notifications, ``/admin/reassign_partitions`` and preferred elections."""

    # --- /isr_change_notification --------------------------------------------------------

    def propagate_isr_change(self, partitions: Iterable[TopicPartition]) -> str:
        """Announce ISR changes to the controller (broker side).

        Returns:
            the created child name, e.g. ``"isr_change_0000000004"``.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        prefix = f"{paths.ISR_CHANGE_NOTIFICATION}/{paths.ISR_CHANGE_PREFIX}"
        data = encode_isr_change_notification(partitions)
        result = self._call("create_async", prefix, data, sequence=True, makepath=True)
        if isinstance(result, ZookeeperError):
            raise ZkOperationError(prefix, type(result).__name__)
        return str(result).rsplit("/", 1)[-1]

    def get_isr_change_notifications(self) -> list[str]:
        """Return the pending ISR change notification names, oldest first.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        return self._sequential_children(paths.ISR_CHANGE_NOTIFICATION, paths.ISR_CHANGE_PREFIX)

    def _sequential_children(self, parent: str, prefix: str) -> list[str]:
        result = self._call("get_children_async", parent)
        if isinstance(result, NoNodeError):
            return []
        if isinstance(result, ZookeeperError):
            raise ZkOperationError(parent, type(result).__name__)
        names = [name for name in result if name.startswith(prefix)]
        return sorted(names, key=lambda name: paths.sequence_number(name, prefix))

    def get_isr_change_notification_partitions(self, names: Iterable[str]) -> set[TopicPartition]:
        """Read ISR change notifications, pipelined, and return the partitions they name.

        Notifications deleted meanwhile are skipped.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: a notification is not Kafka's format.
        """
        znodes = [paths.isr_change_notification_path(n) for n in names]
        partitions: set[TopicPartition] = set()
        for path, result in zip(
            znodes, self._run([self._request("get_async", p) for p in znodes]), strict=True
        ):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, ZookeeperError):
                raise ZkOperationError(path, type(result).__name__)
            partitions |= decode_isr_change_notification(result[0])
        return partitions

    def delete_isr_change_notifications(
        self, names: Iterable[str], *, controller_epoch_zk_version: int
    ) -> None:
        """Delete processed ISR change notifications (controller side), pipelined.

        Raises:
            ControllerMovedError: the fence failed.
            ZkConnectionLossError: the session failed.
        """
        znodes = [paths.isr_change_notification_path(n) for n in names]
        self._delete_recursive(znodes, controller_epoch_zk_version)

    # --- /admin/reassign_partitions ----------------------------------------------------

    def create_partition_reassignment(
        self, reassignment: Mapping[TopicPartition, Sequence[int]]
    ) -> None:
        """Queue a reassignment: partition -> target replicas (RAR) (admin side, seed 000 §4.1).

        Raises:
            ReassignmentInProgressError: a reassignment is already queued.
            ZkConnectionLossError: the session failed.
        """
        path, data = paths.ADMIN_REASSIGN_PARTITIONS, encode_partition_reassignment(reassignment)
        result = self._call("create_async", path, data, makepath=True)
        if isinstance(result, NodeExistsError):
            raise ReassignmentInProgressError(f"{path} exists: a reassignment is in progress")
        if isinstance(result, ZookeeperError):
            raise ZkOperationError(path, type(result).__name__)

    def get_partition_reassignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        """Return the queued reassignment (partition -> RAR); empty when none is queued.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: the znode is not Kafka's format.
        """
        path = paths.ADMIN_REASSIGN_PARTITIONS
        result = self._call("get_async", path)
        if isinstance(result, NoNodeError):
            return {}
        if isinstance(result, ZookeeperError):
            raise ZkOperationError(path, type(result).__name__)
        return decode_partition_reassignment(result[0])

    def set_partition_reassignment(
        self,
        reassignment: Mapping[TopicPartition, Sequence[int]],
        *,
        controller_epoch_zk_version: int,
    ) -> None:
        """Rewrite the queued reassignment, e.g. without the completed partitions (controller side).

        Creates the znode when missing (Kafka's ``setOrCreatePartitionReassignment``).

        Raises:
            ControllerMovedError: the fence failed.
            ZkConnectionLossError: the session failed.
        """
        path, data = paths.ADMIN_REASSIGN_PARTITIONS, encode_partition_reassignment(reassignment)
        fence = controller_epoch_zk_version
        error = multi_error(self._multi([SetDataOp(path, data)], fence))
        if isinstance(error, NoNodeError):
            error = multi_error(self._multi([CreateOp(path, data)], fence))
        if error is not None:
            raise ZkOperationError(path, type(error).__name__)

    def delete_partition_reassignment(self, *, controller_epoch_zk_version: int) -> None:
        """Delete ``/admin/reassign_partitions`` once all partitions completed (controller side).

        Raises:
            ControllerMovedError: the fence failed.
            ZkConnectionLossError: the session failed.
        """
        self._delete_recursive([paths.ADMIN_REASSIGN_PARTITIONS], controller_epoch_zk_version)

    # --- /admin/preferred_replica_election ----------------------------------------------

    def create_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> None:
        """Queue a preferred replica election for ``partitions`` (admin side).

        Raises:
            PreferredReplicaElectionInProgressError: an election is already queued.
            ZkConnectionLossError: the session failed.
        """
        path = paths.ADMIN_PREFERRED_REPLICA_ELECTION
        data = encode_preferred_replica_election(partitions)
        result = self._call("create_async", path, data, makepath=True)
        if isinstance(result, NodeExistsError):
            raise PreferredReplicaElectionInProgressError(f"{path} exists: election in progress")
        if isinstance(result, ZookeeperError):
            raise ZkOperationError(path, type(result).__name__)

    def get_preferred_replica_election(self) -> set[TopicPartition]:
        """Return the partitions of the queued preferred replica election (empty if none).

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: the znode is not Kafka's format.
        """
        path = paths.ADMIN_PREFERRED_REPLICA_ELECTION
        result = self._call("get_async", path)
        if isinstance(result, NoNodeError):
            return set()
        if isinstance(result, ZookeeperError):
            raise ZkOperationError(path, type(result).__name__)
        return decode_preferred_replica_election(result[0])

    def delete_preferred_replica_election(self, *, controller_epoch_zk_version: int) -> None:
        """Delete ``/admin/preferred_replica_election`` once elected (controller side).

        Raises:
            ControllerMovedError: the fence failed.
            ZkConnectionLossError: the session failed.
        """
        path = paths.ADMIN_PREFERRED_REPLICA_ELECTION
        self._delete_recursive([path], controller_epoch_zk_version)
