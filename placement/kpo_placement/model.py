"""The cluster model the planner works on: brokers, partitions and their load, as arrays.

Everything is a NumPy array indexed by broker position ``b`` (``0..B-1``) or partition
position ``p`` (``0..P-1``), so scoring a move for all partitions is vector arithmetic.
Broker *ids* (Kafka's ``broker.id``) appear only in :attr:`ClusterModel.broker_ids`.

Resource model (the one Cruise Control uses, without CPU), per replica of partition ``p``:

==================== ============================== ===============================
resource             leader replica                 follower replica
==================== ============================== ===============================
disk (bytes)         ``size_bytes[p]``              ``size_bytes[p]``
network in (B/s)     ``bytes_in[p]`` (produce)      ``bytes_in[p]`` (replication)
network out (B/s)    ``bytes_out[p]`` (consume) +   0
                     ``bytes_in[p] * (rf - 1)``
                     (replication to followers)
==================== ============================== ===============================

``bytes_in``/``bytes_out`` are the per-partition rates aggregated from load samples over
a window (mean or a high percentile, chosen by the job).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

NO_BROKER = -1
"""Padding in :attr:`ClusterModel.replicas` for partitions with fewer than ``max_rf`` replicas."""

IntArray = npt.NDArray[np.int32]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


class ModelError(ValueError):
    """The arrays of a :class:`ClusterModel` are inconsistent; the message says which."""


@dataclass
class ClusterModel:
    """A cluster snapshot as arrays (see the module docstring for the resource model).

    Attributes:
        broker_ids: ``int32[B]`` Kafka broker ids, ascending.
        racks: ``int32[B]`` rack index per broker (into :attr:`rack_names`), -1 without a rack.
        rack_names: Rack names, indexed by rack index.
        alive: ``bool[B]`` whether the broker is registered.
        disk_capacity: ``float64[B]`` bytes.
        net_in_capacity: ``float64[B]`` bytes/s.
        net_out_capacity: ``float64[B]`` bytes/s.
        topics: ``object[P]`` topic name per partition (Python ``str``).
        partitions: ``int32[P]`` partition index within its topic.
        replicas: ``int32[P, max_rf]`` broker *positions* (not ids), preferred leader first,
            padded with :data:`NO_BROKER`.
        leaders: ``int32[P]`` broker position of the current leader, -1 without one.
        size_bytes: ``float64[P]`` bytes of one replica (the leader's log size).
        bytes_in: ``float64[P]`` bytes/s produced to the partition.
        bytes_out: ``float64[P]`` bytes/s consumed from the partition.
    """

    broker_ids: IntArray
    racks: IntArray
    rack_names: list[str]
    alive: BoolArray
    disk_capacity: FloatArray
    net_in_capacity: FloatArray
    net_out_capacity: FloatArray
    topics: npt.NDArray[np.object_]
    partitions: IntArray
    replicas: IntArray
    leaders: IntArray
    size_bytes: FloatArray
    bytes_in: FloatArray
    bytes_out: FloatArray

    @property
    def num_brokers(self) -> int:
        """B, the number of brokers (alive or not)."""
        return int(self.broker_ids.shape[0])

    @property
    def num_partitions(self) -> int:
        """P, the number of partitions."""
        return int(self.partitions.shape[0])

    @property
    def rf(self) -> IntArray:
        """``int32[P]`` replication factor of each partition."""
        return np.asarray((self.replicas != NO_BROKER).sum(axis=1), dtype=np.int32)

    def position_of(self, broker_id: int) -> int:
        """Return the position of ``broker_id`` in the arrays.

        Raises:
            KeyError: No broker has that id.
        """
        found = np.flatnonzero(self.broker_ids == broker_id)
        if found.size == 0:
            raise KeyError(f"no broker with id {broker_id}")
        return int(found[0])

    def validate(self) -> None:
        """Check shapes, dtypes and references between the arrays.

        Raises:
            ModelError: The first inconsistency found.
        """
        b, p = self.num_brokers, self.num_partitions
        for name in ("racks", "alive", "disk_capacity", "net_in_capacity", "net_out_capacity"):
            if getattr(self, name).shape != (b,):
                raise ModelError(f"{name} must have shape ({b},)")
        for name in ("topics", "leaders", "size_bytes", "bytes_in", "bytes_out"):
            if getattr(self, name).shape != (p,):
                raise ModelError(f"{name} must have shape ({p},)")
        if self.replicas.ndim != 2 or self.replicas.shape[0] != p:
            raise ModelError(f"replicas must have shape ({p}, max_rf)")
        if np.any(np.diff(self.broker_ids) <= 0):
            raise ModelError("broker_ids must be strictly ascending")
        if np.any((self.replicas < NO_BROKER) | (self.replicas >= b)):
            raise ModelError("replicas must hold broker positions or -1")
        if np.any(self.rf < 1):
            raise ModelError("every partition needs at least one replica")
        if np.any(np.sort(self.replicas, axis=1)[:, 1:] == np.sort(self.replicas, axis=1)[:, :-1]):
            padded = np.sort(self.replicas, axis=1)
            same = (padded[:, 1:] == padded[:, :-1]) & (padded[:, 1:] != NO_BROKER)
            if np.any(same):
                raise ModelError("a partition lists the same broker twice")
        if np.any(self.racks >= len(self.rack_names)):
            raise ModelError("racks must index rack_names")
